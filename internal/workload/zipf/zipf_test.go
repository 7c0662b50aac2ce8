package zipf

import (
	"math"
	"math/rand/v2"
	"testing"
)

// chiSquare returns Pearson's statistic and degrees of freedom for observed counts against
// probabilities p, merging adjacent cells until each expects at least 5 draws.
func chiSquare(counts []int, p []float64, samples int) (stat float64, df int) {
	var obs, exp float64
	cells := 0
	for i := range p {
		obs += float64(counts[i])
		exp += p[i] * float64(samples)
		if exp >= 5 {
			stat += (obs - exp) * (obs - exp) / exp
			cells++
			obs, exp = 0, 0
		}
	}
	if exp > 0 || obs > 0 { // leftover tail: fold into the statistic as its own cell
		if exp == 0 {
			return math.Inf(1), cells
		}
		stat += (obs - exp) * (obs - exp) / exp
		cells++
	}
	return stat, cells - 1
}

// chiSquareCritical is the upper 0.01% quantile of χ²(df) by the Wilson–Hilferty
// approximation, accurate to well under 1% for the df (≥ 50) used here.
func chiSquareCritical(df int) float64 {
	const z = 3.719 // standard normal upper 1e-4 quantile
	k := float64(df)
	c := 1 - 2/(9*k) + z*math.Sqrt(2/(9*k))
	return k * c * c * c
}

func sample(g Generator, seed uint64, samples int) []int {
	r := rand.New(rand.NewPCG(seed, 7))
	counts := make([]int, g.N())
	for i := 0; i < samples; i++ {
		counts[g.Next(r)]++
	}
	return counts
}

func TestDistributionsMatchTheirLaw(t *testing.T) {
	const n, samples = 1000, 1_000_000
	mustZ := func(theta float64) *Zipfian {
		z, err := NewZipfian(n, theta)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	zipfProbs := func(z *Zipfian) []float64 {
		p := make([]float64, n)
		for k := range p {
			p[k] = z.Prob(uint64(k))
		}
		return p
	}
	cases := []struct {
		name string
		gen  func() (Generator, []float64)
	}{
		{"uniform", func() (Generator, []float64) {
			u, _ := NewUniform(n)
			p := make([]float64, n)
			for i := range p {
				p[i] = 1.0 / n
			}
			return u, p
		}},
		{"zipfian-0.5", func() (Generator, []float64) { z := mustZ(0.5); return z, zipfProbs(z) }},
		{"zipfian-0.8", func() (Generator, []float64) { z := mustZ(0.8); return z, zipfProbs(z) }},
		{"zipfian-0.99", func() (Generator, []float64) { z := mustZ(0.99); return z, zipfProbs(z) }},
		{"scrambled-0.75", func() (Generator, []float64) { s, _ := NewScrambled(n, 0.75); return s, s.Probs() }},
		{"scrambled-0.99", func() (Generator, []float64) { s, _ := NewScrambled(n, 0.99); return s, s.Probs() }},
		{"latest-0.99", func() (Generator, []float64) {
			l, _ := NewLatest(n, 0.99)
			p := zipfProbs(mustZ(0.99))
			for i, j := 0, len(p)-1; i < j; i, j = i+1, j-1 {
				p[i], p[j] = p[j], p[i]
			}
			return l, p
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, p := c.gen()
			sum := 0.0
			for _, v := range p {
				sum += v
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("probabilities sum to %v, want 1", sum)
			}
			stat, df := chiSquare(sample(g, uint64(100+i), samples), p, samples)
			if crit := chiSquareCritical(df); stat > crit {
				t.Errorf("χ² = %.1f with %d df exceeds the 0.01%% critical value %.1f", stat, df, crit)
			}
		})
	}
}

// The chi-square test must be able to fail: a θ = 0.8 sample is not a θ = 0.99 law, and a
// plain Zipfian sample is not a scrambled one.
func TestChiSquareRejectsWrongLaw(t *testing.T) {
	const n, samples = 1000, 1_000_000
	z8, _ := NewZipfian(n, 0.8)
	z99, _ := NewZipfian(n, 0.99)
	s99, _ := NewScrambled(n, 0.99)
	p99 := make([]float64, n)
	for k := range p99 {
		p99[k] = z99.Prob(uint64(k))
	}
	for _, c := range []struct {
		name string
		g    Generator
		p    []float64
	}{{"θ0.8-vs-θ0.99", z8, p99}, {"zipfian-vs-scrambled", z99, s99.Probs()}} {
		stat, df := chiSquare(sample(c.g, 1, samples), c.p, samples)
		if stat <= chiSquareCritical(df) {
			t.Errorf("%s: χ² = %.1f with %d df accepted a wrong law", c.name, stat, df)
		}
	}
}

// Gray's method approximates the ideal Zipf law; it must stay close to it (total variation
// distance), or "Zipf θ" in an experiment would not mean what the papers mean.
func TestZipfianCloseToIdealZipf(t *testing.T) {
	for _, theta := range []float64{0.5, 0.75, 0.8, 0.99} {
		for _, n := range []uint64{100, 10_000, 1_000_000} {
			z, err := NewZipfian(n, theta)
			if err != nil {
				t.Fatal(err)
			}
			tv := 0.0
			for k := uint64(0); k < n; k++ {
				tv += math.Abs(z.Prob(k) - ZipfProb(n, theta, k))
			}
			tv /= 2
			if tv > 0.05 {
				t.Errorf("n=%d θ=%v: total variation distance from Zipf %.4f > 0.05", n, theta, tv)
			}
			if z.Prob(0) != ZipfProb(n, theta, 0) {
				t.Errorf("n=%d θ=%v: rank 0 probability %v, Zipf says %v", n, theta, z.Prob(0), ZipfProb(n, theta, 0))
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, dist := range []string{"uniform", "zipfian", "scrambled", "latest"} {
		g, err := New(dist, 1_000_000, 0.99)
		if err != nil {
			t.Fatal(err)
		}
		a, b := rand.New(rand.NewPCG(9, 9)), rand.New(rand.NewPCG(9, 9))
		for i := 0; i < 1000; i++ {
			x, y := g.Next(a), g.Next(b)
			if x != y || x >= g.N() {
				t.Fatalf("%s draw %d: %d and %d from equal seeds (n=%d)", dist, i, x, y, g.N())
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		dist  string
		n     uint64
		theta float64
	}{{"zipfian", 1, 0.5}, {"zipfian", 100, 1}, {"zipfian", 100, -0.1}, {"scrambled", 100, math.NaN()},
		{"latest", 0, 0.5}, {"uniform", 0, 0}, {"pareto", 100, 0.5}, {"uniform", MaxItems + 1, 0},
		{"zipfian", MaxZipfianItems + 1, 0.5}, {"scrambled", MaxZipfianItems + 1, 0.5}, {"latest", MaxZipfianItems + 1, 0.5}} {
		if _, err := New(c.dist, c.n, c.theta); err == nil {
			t.Errorf("New(%q, %d, %v) accepted bad input", c.dist, c.n, c.theta)
		}
	}
}

// YCSB's fnvhash64 of 0 and 1, computed by hand from the FNV-1a definition over eight bytes.
func TestFNVHash64(t *testing.T) {
	ref := func(v uint64) uint64 {
		h := uint64(0xCBF29CE484222325)
		for i := 0; i < 8; i++ {
			h = (h ^ (v >> (8 * i) & 0xff)) * 1099511628211
		}
		if int64(h) < 0 {
			h = uint64(-int64(h))
		}
		return h
	}
	for _, v := range []uint64{0, 1, 2, 255, 256, 1 << 40, 123456789} {
		if got, want := FNVHash64(v), ref(v); got != want {
			t.Errorf("FNVHash64(%d) = %d, want %d", v, got, want)
		}
	}
}

func BenchmarkScrambledNext(b *testing.B) {
	s, _ := NewScrambled(1_000_000, 0.99)
	r := rand.New(rand.NewPCG(1, 1))
	for b.Loop() {
		s.Next(r)
	}
}

func BenchmarkZeta1M(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Zeta(1_000_000, 0.5+float64(i)*1e-9) // a distinct θ per iteration, so nothing is cached
	}
}
