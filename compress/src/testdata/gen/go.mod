module ferry/compress/testdata/gen

go 1.24

require github.com/klauspost/compress v1.18.7
