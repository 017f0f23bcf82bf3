package jsruntime

import (
	"math"
	"strconv"
)

// appendNumber appends the JSON text of a finite double the way JavaScript's
// Number.prototype.toString (and so JSON.stringify) writes it: the shortest
// decimal that reads back as the same double, integers without a fraction
// ("20", not "20.0"), plain notation from 1e-6 up to 1e21 and exponent
// notation outside ("1e+21", "1.5e-7"). -0 is written "0". The caller
// handles NaN and infinities, which JSON cannot hold.
func appendNumber(b []byte, f float64) []byte {
	if f == 0 {
		return append(b, '0')
	}
	if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
		if f == math.Trunc(f) && abs < 1<<53 {
			return strconv.AppendInt(b, int64(f), 10)
		}
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	// Go writes at least two exponent digits ("1e-07"); JavaScript does not.
	for i := len(b) - 1; i > start; i-- {
		if b[i] == 'e' {
			if i+3 < len(b) && b[i+2] == '0' {
				b = append(b[:i+2], b[i+3:]...)
			}
			break
		}
	}
	return b
}
