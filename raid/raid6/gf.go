package raid6

// GF(2^8) with polynomial 0x11d and generator 2, md's RAID6 field: the
// tables the scrub needs to locate a wrong chunk from the P and Q
// syndromes (see locate).
var gfExp, gfLog = gfTables()

func gfTables() (exp [255]byte, log [256]byte) {
	x := byte(1)
	for i := range 255 {
		exp[i] = x
		log[x] = byte(i)
		hi := x & 0x80
		x <<= 1
		if hi != 0 {
			x ^= 0x1d
		}
	}
	return exp, log
}

// Where locate puts the wrong chunk.
const (
	locNone        = -1 // P and Q both match the data
	locUnlocatable = -2 // the differences fit no single wrong chunk
)

// locate finds the one chunk of a row whose corruption explains dp = P xor
// P' and dq = Q xor Q' (P' and Q' computed from the data as read), as md's
// raid6check does, byte by byte: only P differs, so P is wrong (dk); only
// Q differs, so Q is wrong (dk+1); both differ, so data chunk z is wrong,
// where dq = 2^z · dp, that is z = log(dq) - log(dp). Every differing byte
// must name the same chunk, or the row has more than one wrong chunk
// (locUnlocatable). first is the first differing byte.
func locate(dp, dq []byte, dk int) (target, first int) {
	target, first = locNone, -1
	for i := range dp {
		a, b := dp[i], dq[i]
		if a == 0 && b == 0 {
			continue
		}
		var t int
		switch {
		case b == 0:
			t = dk
		case a == 0:
			t = dk + 1
		default:
			t = (int(gfLog[b]) - int(gfLog[a]) + 255) % 255
			if t >= dk {
				if first < 0 {
					first = i
				}
				return locUnlocatable, first
			}
		}
		if first < 0 {
			first, target = i, t
		} else if t != target {
			return locUnlocatable, first
		}
	}
	return target, first
}
