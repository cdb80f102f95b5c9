package cluster

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ParseKey decodes a gossip encryption key written as hex or as base64 (standard encoding, with
// padding), ignoring surrounding white space, and checks that it is 16, 24 or 32 bytes
// (AES-128, -192 or -256). A string made only of hex digits, of even length, is read as hex:
// 32 hex digits are a 16-byte key, although they would also be valid base64.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("cluster: gossip key is empty")
	}
	var key []byte
	if isHex(s) && len(s)%2 == 0 {
		k, err := hex.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip key is not valid hex: %v", err)
		}
		key = k
	} else {
		k, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip key is neither hex nor standard base64 (%v)", err)
		}
		key = k
	}
	if err := checkKeyLen(len(key)); err != nil {
		return nil, err
	}
	return key, nil
}

// checkKeyLen reports whether n is a valid AES key length.
func checkKeyLen(n int) error {
	switch n {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("cluster: gossip key is %d bytes; it must be 16, 24 or 32 bytes (AES-128, AES-192 or AES-256)", n)
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
