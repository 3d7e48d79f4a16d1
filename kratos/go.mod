module github.com/graylb/graylb/kratos

go 1.23.0

// Kratos v2.7.2 is the lowest v2 release this module works with. Its HTTP
// server no longer recycles a request's context (a sync.Pool, removed in
// v2.7.2): in v2.5.3-v2.7.1 a handler that calls the next service with its
// context races with the next request the server serves (the race
// detector reports it in every edge -> A -> B chain over HTTP). Before
// v2.5.3, selector.SetGlobalSelector does not reach Kratos' gRPC clients
// (they copy the global selector when the package initialises); before
// v2.5.0 there is no SetGlobalSelector.
require github.com/go-kratos/kratos/v2 v2.7.2

require (
	github.com/graylb/graylb v0.1.0
	google.golang.org/grpc v1.56.3
	google.golang.org/protobuf v1.31.0
)

require (
	github.com/go-kratos/aegis v0.2.0 // indirect
	github.com/go-playground/form/v4 v4.2.0 // indirect
	github.com/golang/protobuf v1.5.3 // indirect
	github.com/google/uuid v1.3.0 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	golang.org/x/net v0.17.0 // indirect
	golang.org/x/sys v0.13.0 // indirect
	golang.org/x/text v0.13.0 // indirect
	google.golang.org/genproto v0.0.0-20230629202037-9506855d4529 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20230629202037-9506855d4529 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20230629202037-9506855d4529 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
