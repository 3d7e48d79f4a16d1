module github.com/graylb/graylb/kafkagray

go 1.23

require (
	github.com/graylb/graylb v0.1.0
	github.com/twmb/franz-go v1.5.0
	github.com/twmb/franz-go/pkg/kmsg v1.0.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/klauspost/compress v1.15.2 // indirect
	github.com/pierrec/lz4/v4 v4.1.14 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	github.com/twmb/go-rbtree v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/graylb/graylb => ..
