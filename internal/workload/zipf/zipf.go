// Package zipf draws integers in [0, n) with the distributions YCSB uses to pick keys: uniform,
// Zipfian (Gray et al.'s "Quickly generating billion-record synthetic databases", as YCSB's
// ZipfianGenerator implements it), scrambled Zipfian (Zipfian ranks spread over the key space
// by an FNV-1a hash, so the hot keys are not neighbours) and latest (the highest-numbered,
// i.e. newest, keys are the hot ones).
//
// Gray's method is an approximation of the Zipf law: ranks 0 and 1 get their exact Zipf
// probability and the tail follows a continuous power law. Zipfian.Prob gives the exact
// probability of each rank under the generator itself (what a chi-square test should compare
// with); ZipfProb gives the ideal Zipf law.
//
// Where YCSB's ScrambledZipfianGenerator draws ranks from 10^10 items with a hard-coded zeta for
// θ = 0.99, Scrambled draws ranks from the n items themselves, so any θ works; the FNV scramble is
// YCSB's (fnvhash64 of the rank, modulo n).
//
// Generators hold no rng: each call takes the caller's seeded *rand.Rand, so one generator can be
// shared by many clients and every draw is deterministic. The zeta constant is computed once
// per (n, θ) and cached, since it costs n calls to math.Pow.
package zipf

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
)

// MaxItems bounds n for every generator.
const MaxItems = 1 << 32

// MaxZipfianItems bounds n for the Zipfian family (zipfian, scrambled, latest), whose set-up
// sums zeta over every item: about 5 s per 100M items, so this bound keeps it within seconds
// where MaxItems would take minutes with no sign of progress.
const MaxZipfianItems = 1 << 27

// Generator draws integers in [0, N()).
type Generator interface {
	Next(r *rand.Rand) uint64
	N() uint64
}

// Uniform draws every integer in [0, n) with equal probability.
type Uniform struct{ n uint64 }

// NewUniform returns a uniform generator over [0, n).
func NewUniform(n uint64) (*Uniform, error) {
	if n == 0 || n > MaxItems {
		return nil, fmt.Errorf("uniform: item count must be 1..%d, got %d", uint64(MaxItems), n)
	}
	return &Uniform{n: n}, nil
}

// Next draws one integer.
func (u *Uniform) Next(r *rand.Rand) uint64 { return r.Uint64N(u.n) }

// N is the item count.
func (u *Uniform) N() uint64 { return u.n }

// Zipfian draws rank k ∈ [0, n) with probability close to (k+1)^-θ / zeta(n, θ): rank 0 is the
// hottest.
type Zipfian struct {
	n                 uint64
	theta             float64
	alpha, zetan, eta float64
	half              float64 // 1 + 0.5^θ: the u·zetan threshold past which ranks ≥ 2 begin
}

type zetaKey struct {
	n     uint64
	theta float64
}

var (
	zetaMu    sync.Mutex
	zetaCache = map[zetaKey]float64{}
)

// Zeta returns Σ_{i=1..n} i^-θ, cached per (n, θ).
func Zeta(n uint64, theta float64) float64 {
	k := zetaKey{n, theta}
	zetaMu.Lock()
	z, ok := zetaCache[k]
	zetaMu.Unlock()
	if ok {
		return z
	}
	// Summing the small terms first keeps the floating-point error low for large n.
	for i := n; i >= 1; i-- {
		z += math.Pow(float64(i), -theta)
	}
	zetaMu.Lock()
	zetaCache[k] = z
	zetaMu.Unlock()
	return z
}

// NewZipfian returns a Zipfian generator over [0, n) with skew theta ∈ [0, 1) (0 is uniform;
// YCSB's default is 0.99).
func NewZipfian(n uint64, theta float64) (*Zipfian, error) {
	if n < 2 || n > MaxZipfianItems {
		return nil, fmt.Errorf("zipfian: item count must be 2..%d, got %d", uint64(MaxZipfianItems), n)
	}
	if !(theta >= 0 && theta < 1) {
		return nil, fmt.Errorf("zipfian: θ must be in [0, 1), got %v", theta)
	}
	zetan := Zeta(n, theta)
	zeta2 := 1 + math.Pow(2, -theta)
	return &Zipfian{
		n:     n,
		theta: theta,
		alpha: 1 / (1 - theta),
		zetan: zetan,
		eta:   (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta2/zetan),
		half:  zeta2,
	}, nil
}

// N is the item count.
func (z *Zipfian) N() uint64 { return z.n }

// Theta is the skew.
func (z *Zipfian) Theta() float64 { return z.theta }

// Next draws one rank.
func (z *Zipfian) Next(r *rand.Rand) uint64 {
	u := r.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < z.half {
		return 1
	}
	k := uint64(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if k >= z.n { // rounding at u → 1
		k = z.n - 1
	}
	return k
}

// cdf returns P(Next < k) for 2 ≤ k ≤ n: Next ≥ k exactly when n·(ηu − η + 1)^α ≥ k.
func (z *Zipfian) cdf(k uint64) float64 {
	if k >= z.n {
		return 1
	}
	return (math.Pow(float64(k)/float64(z.n), 1-z.theta) - 1 + z.eta) / z.eta
}

// Prob is the exact probability that Next returns k under Gray's method.
func (z *Zipfian) Prob(k uint64) float64 {
	switch {
	case k >= z.n:
		return 0
	case k == 0:
		return 1 / z.zetan
	case k == 1:
		return (z.half - 1) / z.zetan
	}
	return z.cdf(k+1) - z.cdf(k)
}

// ZipfProb is the ideal Zipf law's probability of rank k: (k+1)^-θ / zeta(n, θ).
func ZipfProb(n uint64, theta float64, k uint64) float64 {
	if k >= n {
		return 0
	}
	return math.Pow(float64(k+1), -theta) / Zeta(n, theta)
}

// Scrambled is YCSB's scrambled Zipfian: a Zipfian rank hashed over [0, n), so the popular
// items are scattered over the key space (and hence over shards) instead of being keys 0, 1, 2…
type Scrambled struct{ z *Zipfian }

// NewScrambled returns a scrambled Zipfian generator over [0, n).
func NewScrambled(n uint64, theta float64) (*Scrambled, error) {
	z, err := NewZipfian(n, theta)
	if err != nil {
		return nil, fmt.Errorf("scrambled %w", err)
	}
	return &Scrambled{z: z}, nil
}

// Next draws one item.
func (s *Scrambled) Next(r *rand.Rand) uint64 { return FNVHash64(s.z.Next(r)) % s.z.n }

// N is the item count.
func (s *Scrambled) N() uint64 { return s.z.n }

// Prob is the exact probability that Next returns item i: the sum of the probabilities of
// the ranks that hash to i. It costs O(n).
func (s *Scrambled) Prob(i uint64) float64 {
	p := 0.0
	for k := uint64(0); k < s.z.n; k++ {
		if FNVHash64(k)%s.z.n == i {
			p += s.z.Prob(k)
		}
	}
	return p
}

// Probs returns Prob(i) for every item, in O(n).
func (s *Scrambled) Probs() []float64 {
	out := make([]float64, s.z.n)
	for k := uint64(0); k < s.z.n; k++ {
		out[FNVHash64(k)%s.z.n] += s.z.Prob(k)
	}
	return out
}

// FNVHash64 is YCSB's Utils.fnvhash64: FNV-1a over the eight bytes of v, low byte first, made
// non-negative as Java's Math.abs does (which leaves math.MinInt64 as it is; we clear its sign
// bit instead so the result is always a valid non-negative value).
func FNVHash64(v uint64) uint64 {
	const (
		offsetBasis = 0xCBF29CE484222325
		prime       = 1099511628211
	)
	h := uint64(offsetBasis)
	for i := 0; i < 8; i++ {
		h ^= v & 0xff
		v >>= 8
		h *= prime
	}
	s := int64(h)
	if s < 0 {
		s = -s
	}
	return uint64(s) &^ (1 << 63)
}

// Latest favours the newest items: item n-1-k is drawn with the Zipfian probability of rank k.
// YCSB's SkewedLatestGenerator does the same relative to the latest inserted record; Meridian's
// workloads do not insert, so the newest record is the highest-numbered one.
type Latest struct{ z *Zipfian }

// NewLatest returns a latest generator over [0, n).
func NewLatest(n uint64, theta float64) (*Latest, error) {
	z, err := NewZipfian(n, theta)
	if err != nil {
		return nil, fmt.Errorf("latest %w", err)
	}
	return &Latest{z: z}, nil
}

// Next draws one item.
func (l *Latest) Next(r *rand.Rand) uint64 { return l.z.n - 1 - l.z.Next(r) }

// N is the item count.
func (l *Latest) N() uint64 { return l.z.n }

// New builds a generator by distribution name: "uniform", "zipfian", "scrambled" (YCSB's
// default for key choice) or "latest".
func New(dist string, n uint64, theta float64) (Generator, error) {
	switch dist {
	case "uniform":
		return NewUniform(n)
	case "zipfian":
		return NewZipfian(n, theta)
	case "scrambled", "scrambled-zipfian", "":
		return NewScrambled(n, theta)
	case "latest":
		return NewLatest(n, theta)
	}
	return nil, fmt.Errorf("unknown key distribution %q (want uniform, zipfian, scrambled or latest)", dist)
}
