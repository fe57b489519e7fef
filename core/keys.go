package core

import (
	"strings"
)

// lockKeys are the Redis names of one lock, all in one Cluster slot. See
// docs/design.md, "Redis layout".
type lockKeys struct {
	// names: the lock hash (also the channel), its slot's fence floor, the
	// queue (zset) and its entries (hash); an array, so KEYS need no allocation
	names [4]string
	args  [4]any // names as script arguments (interfaces), made once
	// permits is a semaphore's count (0 for a lock), permitsArg its argument
	permits    int
	permitsArg any
	// read: an RLock's keys, whose holders are entries of the lock hash
	read bool
}

func (k *lockKeys) hash() string { return k.names[0] }

// ownerID is an owner id and its script arguments on one lock, boxed once.
type ownerID struct {
	id     string
	arg    any // id
	marker any // the key of id's done marker on the lock: "<prefix>{<name>}:done:<id>"
}

// newOwner returns a fresh owner on k's lock. Its id is the tail of its
// marker's name, so both take one allocation.
func (k *lockKeys) newOwner() ownerID {
	var b [160]byte // on the stack for a lock key of up to about 110 bytes
	marker := string(appendOwnerID(append(append(b[:0], k.names[0]...), ":done:"...)))
	id := marker[len(k.names[0])+len(":done:"):]
	return ownerID{id: id, arg: id, marker: marker}
}

// script returns the KEYS of the acquire and release scripts for owner.
func (k *lockKeys) script(owner ownerID) []any {
	return []any{k.args[0], k.args[1], owner.marker, k.args[2], k.args[3]}
}

var (
	braceEscaper   = strings.NewReplacer("%", "%25", "}", "%7D")
	braceUnescaper = strings.NewReplacer("%7D", "}", "%25", "%")
)

// keysFor returns the keys of the lock named name.
func (l *Locker) keysFor(name string) lockKeys {
	// '}' would end the hash tag early; escaping '%' too keeps names one-to-one.
	name = braceEscaper.Replace(name) // the same string, unless it holds one
	// "<hash>", "<hash>:q" and "<hash>:qt" share one allocation.
	qt := l.opts.prefix + "{" + name + "}:qt"
	// The fence floor is its slot's: "<prefix>{<slot's tag>}:fence" (slot.go).
	floor := l.opts.prefix + "{" + slotTags()[slotOf(name)] + "}:fence"
	k := lockKeys{names: [4]string{qt[:len(qt)-3], floor, qt[:len(qt)-1], qt}}
	for i, n := range k.names {
		k.args[i] = n
	}
	return k
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

// nameOf is keysFor's inverse for a lock hash's key.
func (l *Locker) nameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, l.opts.prefix+"{")
	if !ok || !strings.HasSuffix(rest, "}") || strings.Contains(rest[:len(rest)-1], "}") {
		return "", false
	}
	name := rest[:len(rest)-1]
	if strings.Contains(name, "%") {
		name = braceUnescaper.Replace(name)
	}
	return name, true
}

// globEscape quotes the glob characters of s for SCAN MATCH.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
