package cli

import (
	"strings"
	"testing"
)

// TestHTTPUnspecified: --http with a wildcard address is refused before anything listens
// (the node would advertise https://[::]:PORT in links and to the cluster).
func TestHTTPUnspecified(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		n, err := httpFlags{addr: addr}.open(creds{}, "test", nil)
		if n != nil || err == nil || !strings.Contains(err.Error(), "give the IP others reach this node at") {
			t.Errorf("--http %s: %v, %v", addr, n, err)
		}
	}
}
