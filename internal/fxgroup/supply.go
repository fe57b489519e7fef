// Package fxgroup holds the fx helper shared by lockgate's fx packages.
package fxgroup

import "go.uber.org/fx"

// Supply puts each value into the fx value group named group, so that a
// constructor taking `group:"<group>"` receives them.
func Supply[T any](group string, values []T) fx.Option {
	supplies := make([]any, 0, len(values))
	for _, v := range values {
		supplies = append(supplies, fx.Annotate(v, fx.ResultTags(`group:"`+group+`"`)))
	}
	return fx.Supply(supplies...)
}
