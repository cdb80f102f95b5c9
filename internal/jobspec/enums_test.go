package jobspec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/messages"
	"github.com/didnmf/didnmf/usererr"
)

// roundTrip checks that FromWire(s.Wire()) is s, for a spec Check accepts.
func roundTrip(t *testing.T, s *Spec) *messages.JobSpec {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("spec refused: %v", err)
	}
	w := s.Wire()
	got, err := FromWire(w)
	if err != nil {
		t.Fatalf("FromWire(Wire(s)): %v", err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("FromWire(Wire(s)) = %+v, want %+v", got, s)
	}
	return w
}

// checkWord checks that an enum value on the wire is defined and reads as the typed value's
// word (the CLI prints one, JSON carries the other).
func checkWord(t *testing.T, e interface {
	protoreflect.Enum
	Name() string
}, typed any) {
	t.Helper()
	if e.Descriptor().Values().ByNumber(e.Number()) == nil {
		t.Fatalf("%v went on the wire as %s(%d), which the enum does not define", typed, e.Descriptor().Name(), e.Number())
	}
	if want := fmt.Sprint(typed); e.Name() != want {
		t.Errorf("%v went on the wire as %s, whose word is %q", typed, e, e.Name())
	}
}

// TestWireEveryEnumValue sends every value of every enum field through Wire and FromWire.
func TestWireEveryEnumValue(t *testing.T) {
	for _, a := range kernels.Algorithms() {
		t.Run("algorithm "+string(a.Name), func(t *testing.T) {
			s := good(t)
			s.Algo, s.Layout = a.Name, matio.AutoFor(a.Name, matio.LayoutAuto)
			if !a.Distributed {
				s.Shards = 1
			}
			w := roundTrip(t, s)
			checkWord(t, w.Algorithm, a.Name)
			if got := WireAlgorithm(a.Name); got != w.Algorithm {
				t.Errorf("WireAlgorithm(%s) = %v, Wire gave %v", a.Name, got, w.Algorithm)
			}
			if got, err := AlgorithmOf(w.Algorithm); err != nil || got != a.Name {
				t.Errorf("AlgorithmOf(%v) = %q, %v", w.Algorithm, got, err)
			}
		})
	}
	for _, m := range []kernels.InitMethod{kernels.InitRandom, kernels.InitNNDSVD, kernels.InitNNDSVDA, kernels.InitKMeans, kernels.InitCustom} {
		t.Run("init "+string(m), func(t *testing.T) {
			s := good(t)
			s.Init = m
			if m == kernels.InitCustom {
				s.InitBasis, s.InitCoef = "/b.npy", "/c.npy"
			}
			checkWord(t, roundTrip(t, s).Init, m)
		})
	}
	for _, f := range []kernels.Form{kernels.FormAuto, kernels.FormResidual, kernels.FormGram} {
		t.Run("form "+f.String(), func(t *testing.T) {
			s := good(t)
			s.Form = f
			checkWord(t, roundTrip(t, s).Form, f)
		})
	}
	for _, st := range []kernels.Storage{kernels.StorageAuto, kernels.StorageFloat64, kernels.StorageFloat32} {
		t.Run("storage "+st.String(), func(t *testing.T) {
			s := good(t)
			s.Storage = st
			checkWord(t, roundTrip(t, s).Storage, st)
		})
	}
	// A layout-invariant algorithm reads auto as matio.LayoutAutoPath, the others as auto.
	for _, algo := range []kernels.Algorithm{kernels.DID, kernels.HALS} {
		for _, l := range []matio.Layout{matio.LayoutAuto, matio.LayoutDense, matio.LayoutSparse} {
			t.Run(fmt.Sprintf("layout %v for %s", l, algo), func(t *testing.T) {
				s := good(t)
				s.Algo, s.Shards, s.Layout = algo, 1, matio.AutoFor(algo, l)
				checkWord(t, roundTrip(t, s).Layout, l)
			})
		}
	}
	t.Run("transform sqrt", func(t *testing.T) {
		s := good(t)
		s.Transform, s.Storage = matio.TransformSqrt, kernels.StorageAuto // float32 cannot hold square roots
		checkWord(t, roundTrip(t, s).Transform, matio.TransformSqrt)
	})
	t.Run("transform none", func(t *testing.T) {
		checkWord(t, roundTrip(t, good(t)).Transform, matio.TransformNone)
	})
	t.Run("ingest shared", func(t *testing.T) {
		checkWord(t, roundTrip(t, good(t)).Ingest, IngestShared)
	})
	for _, l := range []matio.Layout{matio.LayoutDense, matio.LayoutSparse} {
		t.Run(fmt.Sprintf("ingest stream, natural layout %v", l), func(t *testing.T) {
			s := good(t)
			s.Ingest, s.Samples, s.Features, s.NaturalLayout = IngestStream, 9, 5, l
			w := roundTrip(t, s)
			checkWord(t, w.Ingest, IngestStream)
			checkWord(t, w.NaturalLayout, l)
			if WireLayout(l) != w.NaturalLayout {
				t.Errorf("WireLayout(%v) = %v, Wire gave %v", l, WireLayout(l), w.NaturalLayout)
			}
		})
	}
}

// TestEveryWireValueIsRead checks that FromWire reads every value each enum defines (only
// ALGORITHM_UNSPECIFIED is refused): a value added to the .proto needs its row in a table.
func TestEveryWireValueIsRead(t *testing.T) {
	fields := []struct {
		name string
		enum protoreflect.EnumDescriptor
		set  func(*messages.JobSpec, protoreflect.EnumNumber)
	}{
		{"algorithm", messages.Algorithm(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Algorithm = messages.Algorithm(n) }},
		{"init", messages.Init(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Init = messages.Init(n) }},
		{"form", messages.Form(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Form = messages.Form(n) }},
		{"storage", messages.Storage(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Storage = messages.Storage(n) }},
		{"layout", messages.Layout(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Layout = messages.Layout(n) }},
		{"ingest", messages.Ingest(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Ingest = messages.Ingest(n) }},
		{"transform", messages.Transform(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.Transform = messages.Transform(n) }},
		{"natural_layout", messages.Layout(0).Descriptor(), func(w *messages.JobSpec, n protoreflect.EnumNumber) { w.NaturalLayout = messages.Layout(n) }},
	}
	for _, f := range fields {
		values := f.enum.Values()
		for i := range values.Len() {
			v := values.Get(i)
			t.Run(f.name+" "+string(v.Name()), func(t *testing.T) {
				w := &messages.JobSpec{Inputs: []string{"/x.npy"}, Algorithm: messages.Algorithm_ALGORITHM_HPC_ANLS, Rank: 2, Shards: 1,
					Samples: 9, Features: 5, NaturalLayout: messages.Layout_LAYOUT_DENSE}
				f.set(w, v.Number())
				if w.Init == messages.Init_INIT_CUSTOM {
					w.InitBasis, w.InitCoef = "/b.npy", "/c.npy"
				}
				if w.Algorithm == messages.Algorithm_ALGORITHM_TRANSFORM { // needs its basis and one pass
					w.Init, w.InitBasis, w.Stop = messages.Init_INIT_CUSTOM, "/b.npy", &messages.StopRule{MaxIter: 1}
				}
				s, err := FromWire(w)
				if v.Name() == "ALGORITHM_UNSPECIFIED" {
					var fe *usererr.Error
					if !errors.As(err, &fe) || fe.Field != "algorithm" || fe.Error() != "algorithm: no algorithm given" {
						t.Fatalf("got %v, want the *usererr.Error algorithm: no algorithm given", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				back := s.Wire().ProtoReflect()
				if got := back.Get(back.Descriptor().Fields().ByName(protoreflect.Name(f.name))).Enum(); got != v.Number() {
					t.Errorf("%s %s came back from the Spec as %d", f.name, v.Name(), got)
				}
			})
		}
	}
}

// TestFromWireOutOfRange: a value no enum defines (a hostile or newer peer's) is a *usererr.Error
// naming the field and the value, never a panic nor a default.
func TestFromWireOutOfRange(t *testing.T) {
	fields := map[string]func(*messages.JobSpec, int32){
		"algorithm":      func(w *messages.JobSpec, v int32) { w.Algorithm = messages.Algorithm(v) },
		"init":           func(w *messages.JobSpec, v int32) { w.Init = messages.Init(v) },
		"form":           func(w *messages.JobSpec, v int32) { w.Form = messages.Form(v) },
		"storage":        func(w *messages.JobSpec, v int32) { w.Storage = messages.Storage(v) },
		"layout":         func(w *messages.JobSpec, v int32) { w.Layout = messages.Layout(v) },
		"ingest":         func(w *messages.JobSpec, v int32) { w.Ingest = messages.Ingest(v) },
		"natural_layout": func(w *messages.JobSpec, v int32) { w.NaturalLayout = messages.Layout(v) },
		"transform":      func(w *messages.JobSpec, v int32) { w.Transform = messages.Transform(v) },
	}
	for field, set := range fields {
		for _, v := range []int32{99, -1, 1 << 30, -1 << 31} {
			t.Run(fmt.Sprintf("%s %d", field, v), func(t *testing.T) {
				w := good(t).Wire()
				set(w, v)
				s, err := FromWire(w)
				var fe *usererr.Error
				if !errors.As(err, &fe) {
					t.Fatalf("got %+v, %v (%T), want a *usererr.Error", s, err, err)
				}
				want := fmt.Sprintf("%s: unknown value %d on the wire (known: ", field, v)
				if fe.Field != field || !strings.HasPrefix(fe.Error(), want) {
					t.Errorf("got field %q, %q; want field %q, %q...", fe.Field, fe.Error(), field, want)
				}
			})
		}
	}
}

// TestWireWithoutAnEnum: a typed value no enum stands for (one Check refuses) is sent as a
// value FromWire refuses, naming the field, not as a default that would run another job.
func TestWireWithoutAnEnum(t *testing.T) {
	cases := []struct {
		name, field string
		edit        func(*Spec)
	}{
		{"storage as-is", "storage", func(s *Spec) { s.Storage = kernels.StorageAsIs }},
		{"algorithm svd", "algorithm", func(s *Spec) { s.Algo = "svd" }},
		{"init svd", "init", func(s *Spec) { s.Init = "svd" }},
		{"form 9", "form", func(s *Spec) { s.Form = 9 }},
		{"layout 9", "layout", func(s *Spec) { s.Layout = 9 }},
		{"ingest empty", "ingest", func(s *Spec) { s.Ingest = "" }},
		{"natural layout 9", "natural_layout", func(s *Spec) { s.NaturalLayout = 9 }},
		{"transform log", "transform", func(s *Spec) { s.Transform = "log" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := good(t)
			c.edit(s)
			_, err := FromWire(s.Wire())
			var fe *usererr.Error
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Error(), "unknown value -1") {
				t.Fatalf("got %v, want a *usererr.Error of %s naming the value -1", err, c.field)
			}
		})
	}
	// "" is random to kernels.ParseInitMethod, so to Check: it goes as INIT_RANDOM.
	s := good(t)
	s.Init = ""
	if w := s.Wire(); w.Init != messages.Init_INIT_RANDOM {
		t.Errorf("init \"\" went on the wire as %v", w.Init)
	}
}
