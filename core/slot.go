package core

import (
	"strconv"
	"sync"
)

// The fence floor of a lock name is kept per Cluster hash slot, not per
// name, so that what locking leaves in Redis does not grow with the number
// of names; its hash tag is a short string that hashes to the lock's slot.
// See docs/internals.md, "Fence floors per hash slot".

const slots = 16384

// slotOf is the Cluster hash slot of a key whose hash tag is tag (CRC16,
// XMODEM, as Redis computes it).
func slotOf(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^tag[i]]
	}
	return int(crc) % slots
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// slotTags[s] is a hash tag of slot s: the first decimal number that hashes
// there (all of them are below 200000).
var slotTags = sync.OnceValue(func() *[slots]string {
	var tags [slots]string
	for n, left := 0, slots; left > 0; n++ {
		s := strconv.Itoa(n)
		if i := slotOf(s); tags[i] == "" {
			tags[i] = s
			left--
		}
	}
	return &tags
})

// floorKey is the fence floor of the slot of the lock whose hash tag is
// tag: "<prefix>{<slot's tag>}:fence".
func (l *Locker) floorKey(tag string) string {
	return l.opts.prefix + "{" + slotTags()[slotOf(tag)] + "}:fence"
}
