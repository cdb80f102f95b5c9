package httpapi

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/usererr"
)

// FuzzDecodeSpec feeds the spec decoder anything: it never panics, a spec it takes passes
// the spec's check with the API's fixed choices (shared ingest, detached exactly with
// out_shared), and every error is the user's, naming a key or none.
func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"input": "synthetic:m=50,n=40,k=3", "rank": 3}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := DecodeSpec(bytes.NewReader(body))
		if err != nil {
			if !errors.Is(err, usererr.ErrUser) {
				t.Fatalf("error %v is not the user's", err)
			}
			var ue *usererr.Error
			if errors.As(err, &ue) {
				_ = ue.Text(jsonName)
			}
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("a spec taken fails its check: %v", err)
		}
		if len(s.Inputs) == 0 || s.Ingest != jobspec.IngestShared || s.Detached != (s.OutShared != "") {
			t.Fatalf("spec %+v", s)
		}
	})
}

// FuzzAuthorization feeds the Authorization header anything: it never panics, and only the
// operator token and the client tokens of the secret are taken.
func FuzzAuthorization(f *testing.F) {
	s, err := New(Config{Addr: "127.0.0.1:0", Backend: newFakeBackend(), Secret: testSecret})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer " + s.operator)
	f.Add("Bearer " + ClientToken(testSecret, "alice"))
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/api/v1/whoami", nil)
		r.Header["Authorization"] = []string{header}
		id, err := s.authenticate(r)
		if err != nil {
			if !errors.Is(err, errBadCredentials) && !errors.Is(err, errNoCredentials) {
				t.Fatalf("error %v", err)
			}
			return
		}
		_, tok, _ := strings.Cut(header, " ")
		tok = strings.TrimSpace(tok)
		switch id.role {
		case roleOperator:
			if tok != s.operator {
				t.Fatalf("operator by %q", header)
			}
		case roleClient:
			want := ClientToken(testSecret, id.name)
			if CheckClientName(id.name) != nil || !strings.EqualFold(tok, want) || !strings.HasPrefix(tok, "c1."+id.name+".") {
				t.Fatalf("client %q by %q", id.name, header)
			}
		default:
			t.Fatalf("identity %+v", id)
		}
		if !slices.Contains([]string{"token"}, id.via) {
			t.Fatalf("via %q", id.via)
		}
	})
}
