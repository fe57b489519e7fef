package bench

import (
	"fmt"
	"strings"
	"time"
)

// clusterTable sets lockgate on the Cluster beside lockgate on one server,
// on the same workloads of this run: the uncontended cycle against each
// topology's floor, and the contended runs on one key and on 8 (which on
// the Cluster fall on every master). "" when no Cluster row ran.
func (r *Report) clusterTable() string {
	var rows []string
	for _, conc := range uncontendedConc {
		one, cl := r.unc("lockgate", conc), r.unc("lockgate/cluster", conc)
		if one == nil || cl == nil {
			continue
		}
		callers := fmt.Sprintf("%d callers", conc)
		if conc == 1 {
			callers = "1 caller"
		}
		rows = append(rows, fmt.Sprintf("| uncontended, %s: × the floor of its topology | %.2f | %.2f |", callers, one.ratioMed(), cl.ratioMed()))
	}
	for _, keys := range contendedKeys {
		for _, h := range contendedHolds {
			one, cl := r.conKeys("lockgate", h, keys), r.conKeys("lockgate/cluster", h, keys)
			if one == nil || cl == nil {
				continue
			}
			cell := func(j *conJob) string {
				return fmt.Sprintf("%s handoffs/s (%.2f× ideal), wait p99 %s, %d past budget",
					fmtRate(j.med(func(x conResult) float64 { return x.HandoffRate })), j.med(func(x conResult) float64 { return x.Ratio }),
					fmtDur(medDur(collect(j.runs, func(x conResult) float64 { return float64(x.WaitP99) }))),
					sumInts(j.runs, func(x conResult) int64 { return x.PastBudget }))
			}
			what := "one key"
			if keys > 1 {
				what = fmt.Sprintf("%d keys", keys)
			}
			rows = append(rows, fmt.Sprintf("| contended, %s, %v holds | %s | %s |", what, h, cell(one), cell(cl)))
		}
	}
	if len(rows) == 0 {
		return ""
	}
	return fmt.Sprintf("## lockgate on a Cluster of %d masters beside one server (this run)\n\n| workload | one server | Cluster |\n|---|---|---|\n%s\n",
		clusterMasters, strings.Join(rows, "\n"))
}

// conKeys is the contended job of name at hold on keys keys, nil if it
// did not run.
func (r *Report) conKeys(name string, hold time.Duration, keys int) *conJob {
	for _, j := range r.Contended {
		if j.peer.name == name && j.hold == hold && j.keys == keys && len(j.runs) > 0 {
			return j
		}
	}
	return nil
}
