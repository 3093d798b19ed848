package api

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3 document of the API; a test checks that it
// describes exactly the server's routes.
//
//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write(openAPI)
	return err
}
