//go:build !unix

package fsroot

import "os"

// readFlags opens for reading.
const readFlags = os.O_RDONLY
