package core

import (
	"strings"
)

// lockKeys are the Redis names of one lock. The lock name is wrapped in a
// hash tag so that the hash, the fence key, the done markers and the
// channel map to one Cluster slot whatever the name contains.
type lockKeys struct {
	// both holds the lock hash (also the release channel) and the key of the
	// last fence issued for this name; kept as an array so that the scripts'
	// KEYS slices need no allocation.
	both [2]string
}

func (k *lockKeys) hash() string  { return k.both[0] }
func (k *lockKeys) fence() string { return k.both[1] }

// marker is the key that records that owner's hold on this lock ended (see
// the release script): "<prefix>{<name>}:done:<owner>".
func (k *lockKeys) marker(owner string) string { return k.both[0] + ":done:" + owner }

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

// hashTag returns the part of a key that Redis Cluster hashes.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
