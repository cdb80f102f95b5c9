module github.com/didnmf/didnmf

go 1.25.3

require gonum.org/v1/gonum v0.17.0 // indirect
