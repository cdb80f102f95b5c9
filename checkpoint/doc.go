// Package checkpoint stores durable checkpoints of NMF shard state, for the fault tolerance of
// the distributed runtime.
//
// A shard of a job writes its state, a [Record], at an iteration boundary. The node keeps the
// shard's own copy and a "buddy" node keeps another: a [Store] holds both kinds, told apart by
// [Kind]. A buddy receives the marshaled bytes over the wire and stores them with
// [Store.WriteBytes].
//
// # Format
//
// A marshaled record is, in order (integers little-endian, float64 values as their IEEE 754
// bits, so that NaN payloads and negative zeros survive a round trip):
//
//	magic     8 bytes  "DIDNMFCK"
//	version   uint16   1
//	job       uint64 length, then the bytes of the name
//	shard     int64
//	shards    int64
//	epoch     uint64
//	iteration int64
//	initial   float64
//	objective float64
//	B         uint64 length, then the values
//	C         uint64 length, then the values
//	State     uint64 count, then each array as a uint64 length and the values
//	Stopper   uint64 length, then the values
//	checksum  uint32   CRC-32C (Castagnoli) of every byte before it
//
// [Unmarshal] checks all of it and never panics; every error it returns wraps [ErrCorrupt]. A
// checkpoint that does not pass must never be used.
//
// # Files
//
// A [Store] opened on a node's data directory dir keeps the checkpoint of shard s of job j at
// iteration i in
//
//	dir/checkpoints/<j>/<kind>/shard-<s>/iter-<i as %012d>.ckpt
//
// Each file is written atomically and durably (package internal/atomicfile): to a temporary
// file in the same directory, synced, renamed to its final name, and the directory synced. A failed write
// (a full disk, say) removes the temporary file, so a file with a final name is always a
// complete checkpoint, and one that fails its checksum anyway (a bad disk) is reported as
// [ErrCorrupt] when read.
package checkpoint
