module github.com/graylb/graylb/badbuildtest

go 1.26.0
