package core

import (
	"strings"
)

// lockKeys are the Redis names of one lock. The lock name is wrapped in a
// hash tag so that the hash, the fence key and the channel map to one
// Cluster slot whatever the name contains.
type lockKeys struct {
	// both holds the lock hash (also the release channel) and the key of the
	// last fence issued for this name; kept as an array so that the scripts'
	// KEYS slices need no allocation.
	both [2]string
}

func (k *lockKeys) hash() string  { return k.both[0] }
func (k *lockKeys) fence() string { return k.both[1] }

var braceEscaper = strings.NewReplacer("%", "%25", "}", "%7D")

func (l *Locker) keysFor(name string) lockKeys {
	if strings.ContainsAny(name, "%}") {
		// '}' would end the hash tag early; escaping '%' too keeps the
		// mapping from names to keys one-to-one.
		name = braceEscaper.Replace(name)
	}
	f := l.opts.prefix + "{" + name + "}:fence" // one allocation for both names
	return lockKeys{both: [2]string{f[:len(f)-len(":fence")], f}}
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
