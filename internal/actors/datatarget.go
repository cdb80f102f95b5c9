package actors

import "github.com/didnmf/didnmf/internal/jobctl"

// jobIDForm is the form of a job id (a regular expression): it becomes part of actor names.
// isJobID checks it; the tests hold the two to each other.
const jobIDForm = `[A-Za-z0-9_-]{1,64}`

// isJobID reports whether s is a job id (jobIDForm): see jobctl.IsJobID.
func isJobID(s string) bool { return jobctl.IsJobID(s) }

// isDataTarget reports whether name is what a data plane frame may be addressed to: a shard or
// a reducer of a job (jobctl.ShardName, jobctl.ReducerName) under the host, that is
//
//	host/JOB-sSHARD  or  host/JOB-eEPOCH-rLEVEL-LO
//
// with JOB of 1 to 64 letters, digits, '_' or '-', SHARD, LEVEL and LO of 1 to 9 digits and
// EPOCH of 1 to 20. It runs on every frame a node reads, so it parses from the right, without
// backtracking or allocation; datatarget_test.go holds it to the regular expression this
// grammar is.
func isDataTarget(name string) bool {
	const prefix = "host/"
	if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
		return false
	}
	s := name[len(prefix):]
	// A field of digits ends the name; the byte before it must be a letter, and the maximal run
	// is the only one that can be followed by one: a digit is never 's', 'r', 'e' or '-'.
	rest, ok := trailingDigits(s, 9)
	if !ok || len(rest) < 2 {
		return false
	}
	switch rest[len(rest)-1] {
	case 's': // JOB-sSHARD
		return rest[len(rest)-2] == '-' && isJobID(rest[:len(rest)-2])
	case '-': // JOB-eEPOCH-rLEVEL-LO
		rest, ok = trailingDigits(rest[:len(rest)-1], 9)
		if !ok || len(rest) < 2 || rest[len(rest)-1] != 'r' || rest[len(rest)-2] != '-' {
			return false
		}
		rest, ok = trailingDigits(rest[:len(rest)-2], 20)
		if !ok || len(rest) < 2 || rest[len(rest)-1] != 'e' || rest[len(rest)-2] != '-' {
			return false
		}
		return isJobID(rest[:len(rest)-2])
	}
	return false
}

// trailingDigits returns what comes before the final run of digits of s, and whether that run
// holds 1 to max digits.
func trailingDigits(s string, max int) (rest string, ok bool) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	n := len(s) - i
	return s[:i], n >= 1 && n <= max
}
