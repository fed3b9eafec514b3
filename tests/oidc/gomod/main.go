// The OpenID Connect provider of agentwatch's identity tests: zitadel/oidc's example provider
// (its op package, in-memory storage and its own login page) with users, their groups and the
// client read from a JSON file. The file is read again at every lookup, so a test that edits a
// user's groups sees the change at the next token refresh, as with a real directory.
//
//	provider -addr 127.0.0.1:PORT -config seed.json [-tls-cert PEM -tls-key PEM]
//
// The issuer is http://ADDR/ (https with a certificate); it logs one line when it listens ("listening on ...").
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

const groupsScope = "groups"

type seedUser struct {
	ID       string   `json:"id"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Email    string   `json:"email"`
	Name     string   `json:"name"`
	Groups   []string `json:"groups"`
}

type seedClient struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
	// doublestar patterns: the app under test listens on a port chosen at run time.
	RedirectURIGlobs []string `json:"redirect_uri_globs"`
	LogoutURIGlobs   []string `json:"post_logout_redirect_uri_globs"`
	// The profile claims and groups in userinfo only, not in the ID token (as Okta's org
	// server and zitadel itself do by default).
	UserinfoOnly bool `json:"userinfo_only"`
}

type seed struct {
	Users  []seedUser `json:"users"`
	Client seedClient `json:"client"`
}

func readSeed(path string) (seed, error) {
	var s seed
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	err = json.Unmarshal(data, &s)
	return s, err
}

// fileUsers reads the file at every lookup: a test edits groups or removes a user in place.
type fileUsers struct{ path string }

func (f fileUsers) all() []seedUser {
	s, err := readSeed(f.path)
	if err != nil {
		slog.Error("reading users", "error", err)
		return nil
	}
	return s.Users
}

func (f fileUsers) find(match func(seedUser) bool) *seedUser {
	for _, u := range f.all() {
		if match(u) {
			return &u
		}
	}
	return nil
}

func toUser(u *seedUser) *storage.User {
	if u == nil {
		return nil
	}
	return &storage.User{ID: u.ID, Username: u.Username, Password: u.Password,
		FirstName: u.Name, Email: u.Email, EmailVerified: true,
		PreferredLanguage: language.English}
}

func (f fileUsers) GetUserByID(id string) *storage.User {
	return toUser(f.find(func(u seedUser) bool { return u.ID == id }))
}

func (f fileUsers) GetUserByUsername(name string) *storage.User {
	return toUser(f.find(func(u seedUser) bool { return u.Username == name }))
}

func (f fileUsers) ExampleClientID() string { return storage.ServiceUserID }

func (f fileUsers) groups(id string) ([]string, bool) {
	u := f.find(func(u seedUser) bool { return u.ID == id })
	if u == nil {
		return nil, false
	}
	return u.Groups, true
}

// provider adds the `groups` claim (asked for by the `groups` scope, as Dex does) to the
// example storage, and the client's redirect patterns.
type provider struct {
	*storage.Storage
	users  fileUsers
	client seedClient
}

func (p *provider) addGroups(info *oidc.UserInfo, subject string, scopes []string) error {
	if !slices.Contains(scopes, groupsScope) {
		return nil
	}
	groups, ok := p.users.groups(subject)
	if !ok {
		return fmt.Errorf("user not found")
	}
	info.AppendClaims(groupsScope, append([]string{}, groups...))
	return nil
}

func (p *provider) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo,
	request op.IDTokenRequest, scopes []string) error {
	if err := p.Storage.SetUserinfoFromRequest(ctx, info, request, scopes); err != nil {
		return err
	}
	if p.client.UserinfoOnly {
		return nil
	}
	return p.addGroups(info, request.GetSubject(), scopes)
}

func (p *provider) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo,
	tokenID, subject, origin string) error {
	if err := p.Storage.SetUserinfoFromToken(ctx, info, tokenID, subject, origin); err != nil {
		return err
	}
	return p.addGroups(info, subject, []string{groupsScope})
}

// A refresh token of a user who is gone is refused as an invalid grant, as real providers
// answer (the example storage would fail with a server error further on).
func (p *provider) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	request, err := p.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return nil, err
	}
	if _, ok := p.users.groups(request.GetSubject()); !ok {
		return nil, oidc.ErrInvalidGrant().WithDescription("the user no longer exists")
	}
	return request, nil
}

type client struct {
	op.Client
	seed seedClient
}

func (c client) IsScopeAllowed(scope string) bool {
	return scope == groupsScope || c.Client.IsScopeAllowed(scope)
}
func (c client) RedirectURIGlobs() []string           { return c.seed.RedirectURIGlobs }
func (c client) PostLogoutRedirectURIGlobs() []string { return c.seed.LogoutURIGlobs }

// The profile and email claims go into the ID token too (as Keycloak and Dex put them),
// unless the seed says userinfo only.
func (c client) IDTokenUserinfoClaimsAssertion() bool { return !c.seed.UserinfoOnly }

func (p *provider) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	found, err := p.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{found, p.client}, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "where to listen")
	config := flag.String("config", "", "the JSON file of users, groups and the client")
	certFile := flag.String("tls-cert", "", "serve https with this certificate (PEM)")
	keyFile := flag.String("tls-key", "", "and this key (PEM)")
	flag.Parse()
	s, err := readSeed(*config)
	if err != nil {
		log.Fatalf("reading %s: %v", *config, err)
	}
	listener, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	issuer := fmt.Sprintf("%s://%s/", scheme, listener.Addr().String())
	storage.RegisterClients(storage.WebClient(s.Client.ID, s.Client.Secret))
	users := fileUsers{*config}
	store := &provider{Storage: storage.NewStorage(users), users: users, client: s.Client}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	router := exampleop.SetupServer(issuer, store, logger, false)
	fmt.Printf("listening on %s\n", issuer)
	if *certFile != "" {
		log.Fatal(http.ServeTLS(listener, router, *certFile, *keyFile))
	}
	log.Fatal(http.Serve(listener, router))
}
