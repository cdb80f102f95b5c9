package cluster

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	k16 := bytes.Repeat([]byte{0xab}, 16)
	k24 := []byte("0123456789abcdefghijklmn")
	k32 := []byte("0123456789abcdefghijklmnopqrstuv")
	tests := []struct {
		name    string
		in      string
		want    []byte
		wantErr string
	}{
		{"base64 16", base64.StdEncoding.EncodeToString(k16), k16, ""},
		{"base64 24", base64.StdEncoding.EncodeToString(k24), k24, ""},
		{"base64 32", base64.StdEncoding.EncodeToString(k32), k32, ""},
		{"base64 with newline", base64.StdEncoding.EncodeToString(k32) + "\n", k32, ""},
		{"hex 16 (also valid base64)", hex.EncodeToString(k16), k16, ""},
		{"hex 24 upper case", strings.ToUpper(hex.EncodeToString(k24)), k24, ""},
		{"hex 32", hex.EncodeToString(k32), k32, ""},
		{"empty", "", nil, "empty"},
		{"blank", "  \t", nil, "empty"},
		{"base64 of 20 bytes", base64.StdEncoding.EncodeToString(make([]byte, 20)), nil, "20 bytes"},
		{"hex of 8 bytes", hex.EncodeToString(make([]byte, 8)), nil, "8 bytes"},
		{"hex of 33 bytes", hex.EncodeToString(make([]byte, 33)), nil, "33 bytes"},
		{"unpadded base64", strings.TrimRight(base64.StdEncoding.EncodeToString(k16), "="), nil, "neither hex nor standard base64"},
		{"url base64", "-_" + base64.StdEncoding.EncodeToString(k16)[2:], nil, "neither hex nor standard base64"},
		{"junk", "not a key!", nil, "neither hex nor standard base64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseKey(%q) = %x, %v; want an error mentioning %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("ParseKey(%q) = %x, %v; want %x", tt.in, got, err, tt.want)
			}
		})
	}
}
