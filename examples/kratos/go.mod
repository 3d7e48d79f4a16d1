module github.com/graylb/graylb/examples/kratos

go 1.23.0

// A module of its own, so that the other examples do not depend on Kratos.
require (
	github.com/go-kratos/kratos/v2 v2.7.2
	github.com/graylb/graylb v0.1.0
	github.com/graylb/graylb/kratos v0.1.0
)

require (
	google.golang.org/grpc v1.56.3
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/go-kratos/aegis v0.2.0 // indirect
	github.com/go-playground/form/v4 v4.2.0 // indirect
	github.com/golang/protobuf v1.5.4 // indirect
	github.com/google/uuid v1.3.0 // indirect
	github.com/gorilla/mux v1.8.0 // indirect
	golang.org/x/net v0.43.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
	golang.org/x/text v0.28.0 // indirect
	google.golang.org/genproto v0.0.0-20230629202037-9506855d4529 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20230629202037-9506855d4529 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250825161204-c5933d9347a5 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/graylb/graylb => ../..

replace github.com/graylb/graylb/kratos => ../../kratos

replace github.com/graylb/graylb/nacos => ../../nacos
