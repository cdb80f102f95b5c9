#!/usr/bin/env bash
# Regenerates didnmf.pb.go from didnmf.proto. Run through `go generate ./messages`.
# Needs protoc (apt-get install protobuf-compiler); protoc-gen-go is built from the version
# of google.golang.org/protobuf that go.mod pins, so the output does not depend on the machine.
# With OUT=DIR the file is written under DIR instead (CI uses this to compare).
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
protoc --plugin=protoc-gen-go="$tmp/protoc-gen-go" --go_out="$out" --go_opt=paths=source_relative didnmf.proto
