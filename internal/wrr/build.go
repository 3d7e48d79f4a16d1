package wrr

import (
	"math"
	"slices"
)

// members are the members of one level: candidate index, share of the
// level's picks (summing to 1) and tolerated absolute error of that share.
type members struct {
	idx   []int32
	share []float64
	tol   []float64
}

// builder keeps the scratch space of one build.
type builder struct {
	counts []int32 // slots of each member, then the residual
	bucket []int32 // placement buckets
}

// level builds one level over members and returns the members of the next
// (when lv.rest > 0).
func (b *builder) level(idx []int32, share, tol []float64, first, last bool) (lv level, next members) {
	m := len(idx)
	limit := 8 * m // enough for the tolerances to grow 8-fold per level
	if first {
		limit = max(minSlots, limit) // and a raised share at most 1/65536
	}
	b.counts = append(b.counts[:0], make([]int32, m+1)...)
	counts := b.counts[:m]
	if L, ok := smallestLength(share, tol, limit); ok || last {
		if !ok {
			L = limit
		}
		roundCounts(counts, share, float64(L), first)
		return level{s: b.place(idx, b.counts)}, next
	}
	L := limit
	if first {
		// As short as leaves no share below one slot, up to the limit.
		minShare := slices.Min(share)
		for L = 8 * m; L < limit && minShare*float64(L) < 1; L *= 2 {
		}
		L = min(L, limit)
	}
	fL := float64(L)
	// First level: a share below one slot gets one slot; the others share
	// the remaining slots in proportion.
	raised, raisedShare := 0, 0.0
	if first {
		for _, s := range share {
			if s*fL < 1 {
				raised++
				raisedShare += s
			}
		}
	}
	scale := float64(L-raised) / (1 - raisedShare)
	filler := -1
	for i, s := range share {
		if (!first || s*fL >= 1) && tol[i]*fL >= 2 && (filler < 0 || s > share[filler]) {
			filler = i
		}
	}
	// Rounded members: cumulative floors, so each is off by less than one
	// slot and the carry (under one slot) goes to the filler.
	var cum, floorSum float64
	for i, s := range share {
		if i == filler || (first && s*fL < 1) || tol[i]*fL < 2 {
			continue
		}
		cum += s * scale
		f := math.Floor(cum)
		counts[i] = int32(f - floorSum)
		floorSum = f
	}
	carry := cum - floorSum
	used := 0
	for i, s := range share {
		var amount, slack float64
		switch {
		case first && s*fL < 1:
			counts[i] = 1
		case i == filler:
			e := s*scale + carry
			f := math.Floor(e)
			counts[i], amount, slack = int32(f), e-f, tol[i]*fL-carry
		case tol[i]*fL < 2:
			e := s * scale
			f := math.Floor(e)
			counts[i], amount, slack = int32(f), e-f, tol[i]*fL
		}
		used += int(counts[i])
		if amount > 0 {
			next.idx = append(next.idx, idx[i])
			next.share = append(next.share, amount)
			next.tol = append(next.tol, slack)
		}
	}
	rest := L - used
	sum := 0.0
	for _, a := range next.share {
		sum += a
	}
	if rest <= 0 || sum <= 0 {
		// Nothing left over (up to float rounding): give any stray slot to
		// the largest member and end here.
		big := 0
		for i, s := range share {
			if s > share[big] {
				big = i
			}
		}
		counts[big] += int32(rest)
		return level{s: b.place(idx, b.counts)}, members{}
	}
	for i := range next.share {
		next.share[i] /= sum
		next.tol[i] = max(next.tol[i], 0) / float64(rest)
	}
	b.counts[m] = int32(rest)
	return level{s: b.place(idx, b.counts), rest: uint64(rest)}, next
}

// smallestLength returns a length L <= limit at which roundCounts gives
// every member its share to within its tolerance: the smallest one if a
// short search finds it, else the length that guarantees it (an error under
// one slot is within tolerance once L*tol >= 1), if that is within limit.
func smallestLength(share, tol []float64, limit int) (int, bool) {
	m := len(share)
	minTol := math.Inf(1)
	for _, t := range tol {
		minTol = min(minTol, t)
	}
	sure := math.Ceil(1 / minTol)
	tries := (1 << 16) / m // bounds the search at 65536 member steps
	for L := m; L <= limit && L < m+tries && float64(L) < sure; L++ {
		if fits(share, tol, L) {
			return L, true
		}
	}
	if sure <= float64(limit) {
		return max(int(sure), m), true
	}
	return 0, false
}

// fits reports whether roundCounts at length L is within every tolerance.
func fits(share, tol []float64, L int) bool {
	fL := float64(L)
	var cum, prev float64
	for i, s := range share {
		cum += s * fL
		r := math.Floor(cum + 0.5)
		if math.Abs(r-prev-s*fL) > tol[i]*fL {
			return false
		}
		prev = r
	}
	return true
}

// roundCounts sets counts to the members' shares of L slots by cumulative
// rounding (each off by at most one slot, summing to L); on the first level
// a positive share never gets zero slots.
func roundCounts(counts []int32, share []float64, fL float64, first bool) {
	var cum, prev float64
	sum := 0
	for i, s := range share {
		cum += s * fL
		r := math.Floor(cum + 0.5)
		counts[i] = int32(r - prev)
		prev = r
		sum += int(counts[i])
	}
	// Float rounding can leave the total a slot off: fix it on the largest.
	big := 0
	for i := range counts {
		if counts[i] > counts[big] {
			big = i
		}
	}
	counts[big] += int32(int(fL) - sum)
	if first {
		for i := range counts {
			if counts[i] == 0 {
				counts[i] = 1 // the level gets a slot longer
			}
		}
	}
}

// place lays out a level: counts[i] slots for member i (the candidate
// idx[i]) and counts[len(idx)] residual slots, each evenly spaced over the
// level's L slots (the counts' sum). Slot k of c goes to bucket
// floor((2k+1)L / 2c) of L buckets; buckets are taken
// in order and a bucket's slots in member order. A member has at most one
// slot per bucket, so its slots keep their order. O(L + members).
func (b *builder) place(idx []int32, counts []int32) []int32 {
	size := 0
	for _, c := range counts {
		size += int(c)
	}
	L := size // a raised first level is longer than planned
	b.bucket = append(b.bucket[:0], make([]int32, L+1)...)
	bucket := b.bucket
	each := func(i, c int, f func(k, b int)) {
		if c <= 0 {
			return
		}
		// Members' phases follow the golden ratio, so members with the same
		// number of slots do not pile up in the same buckets.
		_, phase := math.Modf(0.5 + float64(i)*0.6180339887498949)
		step := float64(L) / float64(c) // >= 1: one slot per bucket at most
		for k := 0; k < c; k++ {
			f(k, min(int((float64(k)+phase)*step), L-1))
		}
	}
	for i, c := range counts {
		each(i, int(c), func(_, b int) { bucket[b+1]++ })
	}
	for i := 1; i <= L; i++ {
		bucket[i] += bucket[i-1]
	}
	s := make([]int32, L)
	for i, c := range counts {
		id := int32(0)
		if i < len(idx) {
			id = idx[i]
		}
		each(i, int(c), func(k, b int) {
			if i == len(idx) {
				id = ^int32(k)
			}
			s[bucket[b]] = id
			bucket[b]++
		})
	}
	return s
}
