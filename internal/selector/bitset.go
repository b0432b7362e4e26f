package selector

import "math/bits"

// setWords is the number of 64-bit words of a bitset.
const setWords = MaxCandidates / 64

// bitset is a set of local candidate indices 0..MaxCandidates-1. Its
// zero value is the empty set; sets compare with ==.
type bitset [setWords]uint64

func (s *bitset) add(i int)        { s[i>>6] |= 1 << uint(i&63) }
func (s *bitset) remove(i int)     { s[i>>6] &^= 1 << uint(i&63) }
func (s bitset) has(i int) bool    { return s[i>>6]>>uint(i&63)&1 == 1 }
func (s *bitset) or(o *bitset)     { forWords(s, o, func(a, b uint64) uint64 { return a | b }) }
func (s *bitset) andNot(o *bitset) { forWords(s, o, func(a, b uint64) uint64 { return a &^ b }) }
func (s *bitset) and(o *bitset)    { forWords(s, o, func(a, b uint64) uint64 { return a & b }) }

func forWords(s, o *bitset, f func(a, b uint64) uint64) {
	for w := range s {
		s[w] = f(s[w], o[w])
	}
}

func (s bitset) count() int {
	c := 0
	for _, w := range s {
		c += bits.OnesCount64(w)
	}
	return c
}

// lowest is the smallest member, or -1 for the empty set.
func (s bitset) lowest() int {
	for w, x := range s {
		if x != 0 {
			return w*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// list is the members in ascending order.
func (s bitset) list() []int {
	out := make([]int, 0, s.count())
	for w, x := range s {
		for ; x != 0; x &= x - 1 {
			out = append(out, w*64+bits.TrailingZeros64(x))
		}
	}
	return out
}

// firstN is the set 0..n-1.
func firstN(n int) bitset {
	var s bitset
	for i := range n {
		s.add(i)
	}
	return s
}

func setOf(vs []int) bitset {
	var s bitset
	for _, v := range vs {
		s.add(v)
	}
	return s
}

// lexLess says whether a, as a sorted list, comes before b: it holds the
// lowest index where they differ.
func lexLess(a, b *bitset) bool {
	for w := range a {
		if d := a[w] ^ b[w]; d != 0 {
			return a[w]&(d&-d) != 0
		}
	}
	return false
}
