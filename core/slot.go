package core

import (
	"strconv"
	"sync"
)

// Fence floors are kept per Cluster hash slot, not per name. See
// docs/internals.md, "Fence floors per hash slot (`slot.go`)".

const slots = 16384

// slotOf is the Cluster hash slot of hash tag tag (CRC16/XMODEM, as Redis).
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
