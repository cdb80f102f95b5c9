package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/usererr"
)

// TestDecodeSpecAccel: "accel" takes kernels.ParseAccel's forms, defaults to
// jobspec.DefaultAccel, and shows again as the same job.
func TestDecodeSpecAccel(t *testing.T) {
	def, err := kernels.ParseAccel(jobspec.DefaultAccel)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		accel string // "" for none given
		want  kernels.Accel
	}{
		{"", def},
		{`"off"`, kernels.Accel{}},
		{`"auto"`, kernels.AccelAuto},
		{`"3,20,0.1,x"`, kernels.AccelAuto},
		{`"x"`, kernels.Accel{Extrapolate: true}},
		{`"2,7"`, kernels.Accel{CSweeps: 2, BSweeps: 7, Eps: kernels.AccelAuto.Eps}},
		{`"4,6,0.05"`, kernels.Accel{CSweeps: 4, BSweeps: 6, Eps: 0.05}},
	} {
		body := `{"input": "synthetic:m=20,n=100,k=3", "rank": 3`
		if tt.accel != "" {
			body += `, "accel": ` + tt.accel
		}
		body += "}"
		s, err := DecodeSpec(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if s.Accel != tt.want || s.Options().Accel != tt.want {
			t.Errorf("%s: accel %+v, want %+v", body, s.Accel, tt.want)
		}
		enc, err := json.Marshal(EncodeSpec(s))
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeSpec(bytes.NewReader(enc))
		if err != nil || again.Accel != s.Accel {
			t.Errorf("%s shown as %s: decoded again as %+v, %v", body, enc, again, err)
		}
	}
}

// TestDecodeSpecAccelErrors: a bad accel is the user's error naming the key accel.
func TestDecodeSpecAccelErrors(t *testing.T) {
	for _, tt := range []struct{ body, msg string }{
		{`{"input": "x", "rank": 2, "accel": "fast"}`, `accel: accel "fast": want off, auto, x, C,B or C,B,eps`},
		{`{"input": "x", "rank": 2, "accel": "1000000000,5"}`, "sweeps must be in 1..100"},
		{`{"input": "x", "rank": 2, "accel": "3,5,NaN"}`, "eps must be a number in (0, 1), got NaN"},
		{`{"input": "x", "rank": 2, "accel": 3}`, "accel must be a string, got 3"},
		{`{"input": "x", "rank": 2, "accel": true}`, "accel must be a string"},
		{`{"input": "x", "rank": 2, "algorithm": "mu", "accel": "auto"}`, "algorithm mu has no accelerated inner loops (accel auto)"},
	} {
		_, err := DecodeSpec(strings.NewReader(tt.body))
		var ue *usererr.Error
		if !errors.As(err, &ue) || ue.Field != "accel" || !strings.Contains(ue.Text(jsonName), tt.msg) {
			t.Errorf("%s: got %v, want the user's error of field accel with %q", tt.body, err, tt.msg)
		}
	}
}

// TestSubmitAccelErrors: over HTTP, a bad accel is a 400 naming the field.
func TestSubmitAccelErrors(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tt := range []struct{ body, msg string }{
		{`{"input": "synthetic:m=5,n=4,k=2", "rank": 2, "accel": "2,5,2"}`, "eps must be a number in (0, 1), got 2"},
		{`{"input": "synthetic:m=5,n=4,k=2", "rank": 2, "algorithm": "admm", "accel": "auto"}`, "algorithm admm has no accelerated inner loops"},
	} {
		code, body, _ := ts.do(t, "POST", "/api/v1/jobs", ts.op, tt.body)
		var ev ErrorView
		if code != 400 || json.Unmarshal([]byte(body), &ev) != nil || ev.Kind != "user" || ev.Field != "accel" || !strings.Contains(ev.Message, tt.msg) {
			t.Errorf("submit %s: %d %s, want 400 field accel message with %q", tt.body, code, body, tt.msg)
		}
	}
}
