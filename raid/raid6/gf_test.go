package raid6

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[(int(gfLog[a])+int(gfLog[b]))%255]
}

// TestGFTablesMatchMatrix: the scrub's log/exp tables are the field of
// Matrix's Q row (2^i with polynomial 0x11d).
func TestGFTablesMatchMatrix(t *testing.T) {
	q := Matrix(60)[1]
	for i, c := range q {
		require.Equal(t, gfExp[i], c, "2^%d", i)
		require.EqualValues(t, i, gfLog[c])
	}
}

// TestLocate: an error e in data chunk z gives dp = e and dq = 2^z·e at
// every byte it touches, and locate names z; an error in P or Q alone
// names P or Q; errors in two chunks at different bytes, or a syndrome
// pointing past the data chunks, are unlocatable.
func TestLocate(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for dk := 2; dk <= 62; dk += 5 {
		n := 64
		for z := range dk + 2 {
			dp, dq := make([]byte, n), make([]byte, n)
			first := -1
			for i := range n {
				if rng.Intn(3) != 0 {
					continue
				}
				e := byte(rng.Intn(255) + 1)
				if first < 0 {
					first = i
				}
				switch {
				case z == dk:
					dp[i] = e
				case z == dk+1:
					dq[i] = e
				default:
					dp[i], dq[i] = e, gfMul(gfExp[z], e)
				}
			}
			if first < 0 {
				continue
			}
			target, at := locate(dp, dq, dk)
			assert.Equal(t, z, target, "dk %d chunk %d", dk, z)
			assert.Equal(t, first, at)
		}
		// Two data chunks wrong at different bytes.
		dp, dq := make([]byte, n), make([]byte, n)
		dp[3], dq[3] = 7, gfMul(gfExp[0], 7)
		dp[9], dq[9] = 7, gfMul(gfExp[1], 7)
		target, at := locate(dp, dq, dk)
		assert.Equal(t, locUnlocatable, target)
		assert.Equal(t, 3, at)
	}
	// A syndrome ratio beyond the data chunks.
	dp, dq := []byte{0, 5}, []byte{0, gfMul(gfExp[10], 5)}
	target, at := locate(dp, dq, 4)
	assert.Equal(t, locUnlocatable, target)
	assert.Equal(t, 1, at)
	target, _ = locate(make([]byte, 8), make([]byte, 8), 4)
	assert.Equal(t, locNone, target)
}
