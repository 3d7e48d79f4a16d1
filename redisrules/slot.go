package redisrules

import "strings"

// clusterSlots is the number of Redis Cluster hash slots.
const clusterSlots = 16384

// hashSlot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of
// its hash tag, the part between the first '{' and the next '}' when that
// part is not empty, else of the whole key.
func hashSlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}

// sameSlot reports whether every key is in the hash slot of the first.
func sameSlot(keys []string) bool {
	for _, k := range keys[1:] {
		if hashSlot(k) != hashSlot(keys[0]) {
			return false
		}
	}
	return true
}
