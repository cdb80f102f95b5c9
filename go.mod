module github.com/didnmf/didnmf

go 1.25.3
