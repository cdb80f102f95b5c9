// Package messages holds the protobuf messages that cross actors and nodes in didnmf, generated
// from didnmf.proto (see that file for the conventions: packed matrices with shape fields, job,
// epoch and sequence tags, chunking with a CRC-32C checksum).
package messages

//go:generate ./gen.sh
