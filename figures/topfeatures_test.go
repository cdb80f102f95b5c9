package figures

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestTopIndices(t *testing.T) {
	// Features x 2 components, row-major.
	basis := []float64{
		0.1, 5,
		0.9, 5,
		0.5, 0,
		0.9, 1,
		0.0, 2,
	}
	for _, tc := range []struct {
		i, top int
		want   []int
	}{
		{0, 3, []int{1, 3, 2}}, // tie between 1 and 3: the lower index first
		{1, 2, []int{0, 1}},
		{1, 10, []int{0, 1, 4, 3, 2}}, // top > m: all of them
		{0, 0, []int{}},
	} {
		if got := TopIndices(basis, 5, 2, tc.i, tc.top); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("TopIndices(component %d, top %d) = %v, want %v", tc.i, tc.top, got, tc.want)
		}
	}
	// NaN ranks last and does not break the order.
	nan := []float64{1, math.NaN(), 3, 2}
	if got := TopIndices(nan, 4, 1, 0, 3); !reflect.DeepEqual(got, []int{2, 3, 0}) {
		t.Errorf("with a NaN: %v", got)
	}
}

// svgTexts returns the texts of the SVG's <text> elements.
func svgTexts(svg string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<text[^>]*>([^<]*)</text>`).FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

// barBasis is an m x k basis whose component i has its top features at i*7+j (j < 10),
// value 10-j, and small values elsewhere.
func barBasis(m, k int) []float64 {
	basis := make([]float64, m*k)
	for f := 0; f < m; f++ {
		for i := 0; i < k; i++ {
			basis[f*k+i] = 0.001 * float64((f*31+i*17)%13)
		}
	}
	for i := 0; i < k; i++ {
		for j := 0; j < 10; j++ {
			basis[(i*7+j)*k+i] = float64(10 - j)
		}
	}
	return basis
}

func TestTopFeaturesNonImageBasis(t *testing.T) {
	const m, k = 60, 3
	for _, tc := range []struct {
		name  string
		names string // features.txt; "" for none
		label func(f int) string
		warn  bool
	}{
		{"numbered", "", func(f int) string { return fmt.Sprintf("feature %d", f) }, false},
		{"named", names(m, "word"), func(f int) string { return fmt.Sprintf("word%02d", f) }, false},
		{"names of another length", names(m-1, "word"), func(f int) string { return fmt.Sprintf("feature %d", f) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeBasis(t, dir, m, k, barBasis(m, k))
			writeReport(t, dir, map[string]any{"m": m, "n": 500, "k": k, "algo": "hals", "history": history(3, true)})
			if tc.names != "" {
				if err := os.WriteFile(filepath.Join(dir, NamesFile), []byte(tc.names), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var warnings []string
			written, err := WriteResult(dir, "", Options{Warn: func(s string) { warnings = append(warnings, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if tc.warn != (len(warnings) == 1) || (tc.warn && !strings.Contains(warnings[0], "features.txt")) {
				t.Errorf("warnings %q", warnings)
			}
			img := readPNG(t, written[2])
			checkNotBlank(t, "basis.png", img)
			if b := img.Bounds(); b.Dx() > 1600 || b.Dx() < 800 {
				t.Errorf("basis.png is %d px wide", b.Dx())
			}
			if n := countNear(img, [3]int{0x1f, 0x77, 0xb4}, 8); n < 3*10*100 {
				t.Errorf("%d bar-blue pixels, want 3 charts of 10 bars", n)
			}
			svg, err := os.ReadFile(written[3])
			if err != nil {
				t.Fatal(err)
			}
			texts := strings.Join(svgTexts(string(svg)), "|") + "|"
			for i := 0; i < k; i++ {
				if !strings.Contains(texts, fmt.Sprintf("|component %d|", i)) {
					t.Errorf("no title for component %d", i)
				}
				for j := 0; j < 10; j++ {
					if !strings.Contains(texts, "|"+tc.label(i*7+j)+"|") {
						t.Errorf("component %d: top feature %q not labelled", i, tc.label(i*7+j))
					}
				}
			}
			// A feature in no component's top 10 is not shown.
			if strings.Contains(texts, "|"+tc.label(m-1)+"|") {
				t.Errorf("feature %d, in no top 10, is labelled", m-1)
			}
		})
	}
}

func names(n int, prefix string) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s%02d\r\n", prefix, i)
	}
	return b.String()
}

func TestReadFeatureNames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.txt")
	for _, tc := range []struct {
		content string
		m       int
		want    []string
		ok      bool
	}{
		{"a\nb\nc\n", 3, []string{"a", "b", "c"}, true},
		{"a\nb\nc", 3, []string{"a", "b", "c"}, true},
		{"a\r\n\r\nc\r\n", 3, []string{"a", "", "c"}, true},
		{"a\nb\n", 3, nil, false},
		{"a\nb\nc\nd\n", 3, nil, false},
		{"", 1, nil, false},
	} {
		if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFeatureNames(path, tc.m)
		if tc.ok != (err == nil) || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ReadFeatureNames(%q, %d) = %q, %v", tc.content, tc.m, got, err)
		}
	}
	if got, err := ReadFeatureNames(filepath.Join(dir, "none.txt"), 3); got != nil || err != nil {
		t.Errorf("a missing file: %v, %v", got, err)
	}
}

func TestTopFeaturesExtremeValues(t *testing.T) {
	// One component per extreme: all zero, denormal, huge, the largest float64, and NaN and
	// Inf (which a .npy read by matio cannot hold, but a caller can pass).
	vals := []float64{0, 5e-324, 1e300, math.MaxFloat64, math.NaN(), math.Inf(1)}
	const m = 4
	k := len(vals)
	basis := make([]float64, m*k)
	for f := 0; f < m; f++ {
		for i, v := range vals {
			basis[f*k+i] = v
		}
	}
	fig, err := TopFeatures("extremes", basis, m, k, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	render(t, fig) // rasterized too: gg gets the coordinates
	if _, err := TopFeatures("t", basis[:5], m, k, 3, nil); err == nil {
		t.Error("a short basis: no error")
	}
}
