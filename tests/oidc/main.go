// Command oidc-issuer serves a real OpenID Connect provider for the OIDC tests: the
// github.com/oauth2-proxy/mockoidc server (discovery document, JWKS, authorization code
// flow with PKCE, refresh, userinfo; RS256 tokens naming their key id), on a loopback port.
//
// What it adds for the tests, and nothing more:
//   - fixed client credentials (-client-id, -client-secret), so a test knows the audience;
//   - -users FILE, a JSON object {"subject": ["group", ...]}: an authorization request's
//     login_hint picks the person who signs in (an unknown one is refused), as a provider's
//     login page would;
//   - POST /mock/clock?offset=DURATION moves the issuer's clock (mockoidc's FastForward):
//     a token issued at offset -1h has already expired, as one kept too long would have.
//
// On start it prints one JSON line on stdout: {"issuer", "client_id", "client_secret"}.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/oauth2-proxy/mockoidc"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	clientID := flag.String("client-id", "maslab-tests", "the client id (the ID token audience)")
	clientSecret := flag.String("client-secret", "maslab-tests-secret", "the client secret")
	usersFile := flag.String("users", "", `JSON {"subject": ["group", ...]} of who may sign in`)
	accessTTL := flag.Duration("ttl", 10*time.Minute, "lifetime of the issued tokens")
	flag.Parse()

	users := map[string][]string{}
	if *usersFile != "" {
		data, err := os.ReadFile(*usersFile)
		if err != nil {
			log.Fatalf("-users: %v", err)
		}
		if err := json.Unmarshal(data, &users); err != nil {
			log.Fatalf("-users %s: not a JSON object of subject -> groups: %v", *usersFile, err)
		}
	}

	m, err := mockoidc.NewServer(nil)
	if err != nil {
		log.Fatal(err)
	}
	m.ClientID, m.ClientSecret, m.AccessTTL = *clientID, *clientSecret, *accessTTL

	var mu sync.Mutex
	var offset time.Duration
	signIn := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			switch req.URL.Path {
			case "/mock/clock":
				d, err := time.ParseDuration(req.URL.Query().Get("offset"))
				if err != nil || req.Method != http.MethodPost {
					http.Error(rw, "POST /mock/clock?offset=DURATION (e.g. -1h)", http.StatusBadRequest)
					return
				}
				mu.Lock()
				m.FastForward(d - offset)
				offset = d
				mu.Unlock()
				rw.WriteHeader(http.StatusNoContent)
				return
			case mockoidc.AuthorizationEndpoint:
				if hint := req.URL.Query().Get("login_hint"); hint != "" {
					groups, ok := users[hint]
					if !ok {
						http.Error(rw, fmt.Sprintf("unknown user %q", hint), http.StatusForbidden)
						return
					}
					m.QueueUser(&mockoidc.MockUser{Subject: hint, Email: hint + "@example.com", Groups: groups})
				}
			}
			next.ServeHTTP(rw, req)
		})
	}
	if err := m.AddMiddleware(signIn); err != nil {
		log.Fatal(err)
	}

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// mockoidc routes only its own endpoints; the clock endpoint goes through the middleware.
	if err := m.Start(ln, nil); err != nil {
		log.Fatal(err)
	}
	mux := m.Server.Handler.(*http.ServeMux)
	mux.Handle("/mock/clock", signIn(http.NotFoundHandler()))

	line, _ := json.Marshal(map[string]string{
		"issuer": m.Issuer(), "client_id": m.ClientID, "client_secret": m.ClientSecret,
	})
	fmt.Println(string(line))

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
	_ = m.Shutdown()
}
