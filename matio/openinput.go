package matio

import (
	"io/fs"
	"os"
)

// Every file matio reads is opened in one place, [openInput], through an [Opener]; the
// default Opener is [OpenInput]. A FIFO, a socket or a device in place of an input would hang
// a blocking open (a FIFO with no writer) or a read that never ends (/dev/zero), so
// OpenInput opens without blocking and both check what the open returned, on the descriptor
// itself (fstat), before a byte is read: there is no window between a check and the open for
// the path to change. Reading a matrix from a pipe (stdin, a FIFO, a shell's <(...)) is not a
// feature of didnmf: every reader needs to know its file's size or to read it by ranges.

// OpenInput opens path for reading without blocking. It is the [Opener] of [Open], [OpenAll],
// [ReadNPYMatrix] and [PeekImageShape], and the one to give the ...With functions and
// [ReadNames] when nothing confines the paths (not os.Open, which blocks): on Unix it opens with
// O_NONBLOCK (a FIFO with no writer does not hang the open), checks the opened descriptor with
// fstat, refuses anything that is neither a regular file nor a directory (a FIFO, a socket, a
// device) with a *usererr.Error that names path and what it is, and clears O_NONBLOCK again,
// so the file reads as os.Open's would. A directory is returned (an input may be a block
// store or a 10x directory); [OpenRegular] refuses it too. Its other errors are os.Open's
// (an *fs.PathError: errors.Is(err, fs.ErrNotExist) tells a missing file).
func OpenInput(path string) (*os.File, error) {
	f, err := openNonBlocking(path)
	if err != nil {
		return nil, err
	}
	if err := checkKind(path, f, true); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenRegular is [OpenInput] for a path that must be a regular file: a directory is refused
// too, with a *usererr.Error naming path.
func OpenRegular(path string) (*os.File, error) {
	return openInput(OpenInput, path, false)
}

// openInput opens path with open and checks, on the opened file, that it is a regular file,
// or a directory when dirOK. Every reader in matio opens its files here. Errors are the
// user's (see [Opener]); a missing file's still satisfies errors.Is(err, fs.ErrNotExist).
// An Opener other than [OpenInput] should not block either (fsroot's opens with
// O_NONBLOCK): what it opens is checked here all the same.
func openInput(open Opener, path string, dirOK bool) (*os.File, error) {
	f, err := open(path)
	if err != nil {
		return nil, openError(path, err)
	}
	if f == nil {
		return nil, inputErrorf(path, "cannot open: the opener returned no file")
	}
	if err := checkKind(path, f, dirOK); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkKind refuses f, opened as path, unless it is a regular file (or a directory, when
// dirOK), saying what it is instead.
func checkKind(path string, f *os.File, dirOK bool) error {
	st, err := f.Stat()
	if err != nil {
		return ioError(path, "cannot open", err)
	}
	mode := st.Mode()
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		if dirOK {
			return nil
		}
		return inputErrorf(path, "is a directory, not a file")
	}
	return notRegular(path, mode)
}

// notRegular is the error for path, of the given mode, which is not a regular file.
func notRegular(path string, mode fs.FileMode) error {
	return inputErrorf(path, "not a regular file: it is %s, which is not read (give a regular file)", kindOf(mode))
}

// kindOf names the type of a file that is not regular, for an error message.
func kindOf(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	case mode&fs.ModeIrregular != 0:
		return "a file of an unknown type"
	}
	return "not a regular file (mode " + mode.String() + ")"
}
