package matio

import (
	"errors"
)

// ReadNPYMatrix reads a whole 2-D .npy file (any supported dtype and order, optionally
// gzip-compressed) into row-major float64 data, for small files such as initial factors.
// Entries are validated like Read does; errors name the 0-based row and column.
// It opens the file with [OpenInput]: it is [ReadNPYMatrixWith] with [OpenInput].
func ReadNPYMatrix(path string) (rows, cols int, data []float64, err error) {
	return ReadNPYMatrixWith(OpenInput, path)
}

// ReadNPYMatrixWith is [ReadNPYMatrix] with the file opened by open (see [OpenWith]).
func ReadNPYMatrixWith(open Opener, path string) (rows, cols int, data []float64, err error) {
	if open == nil {
		return 0, 0, nil, errors.New("matio: ReadNPYMatrixWith: nil Opener")
	}
	src, err := openPath(open, path, ReadOptions{}, false) // a file; factors hold no missing values
	if err != nil {
		return 0, 0, nil, err
	}
	defer src.Close()
	npy, ok := src.(*npySource)
	if !ok {
		return 0, 0, nil, inputErrorf(path, "not a .npy file")
	}
	// The row-major rows x cols matrix is X (cols x rows) stored column-major.
	d, err := npy.readDense(0, npy.h.rows, LayoutDense, true)
	if err != nil {
		return 0, 0, nil, err
	}
	return npy.h.rows, npy.h.cols, d.Data, nil
}
