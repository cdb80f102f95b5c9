package httpapi_test

import (
	"fmt"

	"github.com/didnmf/didnmf/internal/httpapi"
)

// The tokens a cluster secret's holder hands out: the operator's, and a client's, which sees
// only the jobs it submits.
func ExampleClientToken() {
	secret := []byte("the cluster secret, 32 bytes....")
	fmt.Println(len(httpapi.OperatorToken(secret)))
	if err := httpapi.CheckClientName("alice"); err == nil {
		fmt.Println(httpapi.ClientToken(secret, "alice")[:9])
	}
	// Output:
	// 64
	// c1.alice.
}

// A server on loopback may be plain HTTP; LoginURL is what serve prints for the operator's
// browser. Any other address needs HTTPS.
func ExampleNew() {
	secret := []byte("the cluster secret, 32 bytes....")
	srv, err := httpapi.New(httpapi.Config{Addr: "127.0.0.1:8265", Backend: noBackend{}, Secret: secret})
	if err != nil {
		panic(err)
	}
	fmt.Println(srv.URL())
	fmt.Println(srv.LoginURL() == srv.URL()+"/login?token="+httpapi.OperatorToken(secret))
	_, err = httpapi.New(httpapi.Config{Addr: "0.0.0.0:8265", Backend: noBackend{}, Secret: secret})
	fmt.Println(err != nil)
	// Output:
	// http://127.0.0.1:8265
	// true
	// true
}

// noBackend stands for a node (internal/nodeview's View) in the example.
type noBackend struct{ httpapi.Backend }
