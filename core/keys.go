package core

import (
	"strings"
)

// lockKeys are the Redis names of one lock. The lock name is wrapped in a
// hash tag so that the hash, the fence key and the channel map to one
// Cluster slot whatever the name contains.
type lockKeys struct {
	hash  string // the lock hash; also the release channel
	fence string // the last fence issued for this name
}

var braceEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func (l *Locker) keysFor(name string) lockKeys {
	if strings.ContainsAny(name, "%}") {
		// '}' would end the hash tag early; escaping '%' too keeps the
		// mapping from names to keys one-to-one.
		name = braceEscaper.Replace(name)
	}
	h := l.opts.prefix + "{" + name + "}"
	return lockKeys{hash: h, fence: h + ":fence"}
}

func validateKey(name string) error {
	if name == "" {
		return invalidf("key is empty")
	}
	if len(name) > MaxKeyLen {
		return invalidf("key is %d bytes, over the limit of %d", len(name), MaxKeyLen)
	}
	return nil
}
