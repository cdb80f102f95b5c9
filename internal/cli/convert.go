package cli

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/didnmf/didnmf/internal/atomicfile"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// cmdConvert writes an input (any format didnmf reads, or a synthetic spec) as a dense float64
// file, so that other tools can be run on exactly the same data.
func cmdConvert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	var inputs stringList
	fs.Var(&inputs, "input", "input `PATH` or synthetic spec; repeat to stack")
	out := fs.String("out", "", "output `FILE`")
	format := fs.String("format", "npy", "npy: (samples, features) C order; npy-t: (features, samples), "+
		"the same bytes in Fortran order, for tools that want samples as columns; raw: float64 little-endian, samples contiguous")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: didnmf convert --input SPEC --out FILE [--format npy|npy-t|raw]\n\n"+
			"writes an input (any format factorize reads, or a synthetic spec) as a dense float64 file, so that\n"+
			"other tools can be run on the same data\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, stderr); err != nil {
		return err
	}
	if len(inputs) == 0 || *out == "" {
		return badInput("--input and --out are required")
	}
	if *format != "npy" && *format != "npy-t" && *format != "raw" {
		return badInput("--format must be npy, npy-t or raw, got %q", *format)
	}
	src, err := matio.OpenAll(inputs)
	if err != nil {
		return usererr.Wrap(err)
	}
	defer src.Close()
	m, n := src.Features(), src.Samples()
	// The file is written whole or not at all: an input error halfway leaves nothing.
	err = atomicfile.Write(*out, 0o644, func(w io.Writer) error {
		if *format != "raw" {
			if err := writeNPYHeader(w, n, m, *format == "npy-t"); err != nil {
				return err
			}
		}
		// Stream in chunks of samples: X column-major is the (N, M) row-major data.
		const chunk = 1 << 14
		buf := make([]byte, 8)
		for lo := 0; lo < n; lo += chunk {
			hi := min(lo+chunk, n)
			b, err := src.Read(lo, hi, matio.LayoutDense)
			if err != nil {
				return usererr.Wrap(err)
			}
			for _, v := range kernels.ToDense(b).Data {
				binary.LittleEndian.PutUint64(buf, math.Float64bits(v))
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s: %d samples x %d features (%s)\n", *out, n, m, *format)
	return nil
}

// writeNPYHeader writes a v1.0 .npy header for float64 data of n samples and m features;
// transposed describes the same bytes as an (m, n) Fortran-order array.
func writeNPYHeader(w io.Writer, n, m int, transposed bool) error {
	dict := fmt.Sprintf("{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }", n, m)
	if transposed {
		dict = fmt.Sprintf("{'descr': '<f8', 'fortran_order': True, 'shape': (%d, %d), }", m, n)
	}
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	hdr := append([]byte("\x93NUMPY\x01\x00"), 0, 0)
	binary.LittleEndian.PutUint16(hdr[8:], uint16(len(dict)+pad+1))
	hdr = append(hdr, dict...)
	for i := 0; i < pad; i++ {
		hdr = append(hdr, ' ')
	}
	hdr = append(hdr, '\n')
	_, err := w.Write(hdr)
	return err
}
