module github.com/amdrun/amdrun

go 1.26.8

require (
	github.com/jaypipes/ghw v0.27.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.50.0
)

require (
	github.com/go-ole/go-ole v1.2.6 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/jaypipes/pcidb v1.1.1 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/yusufpapurcu/wmi v1.2.4 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
	howett.net/plist v1.0.2-0.20250314012144-ee69052608d9 // indirect
)
