// A real OpenID Connect provider (the certified `oidc-provider` package) for
// the portal's SSO tests. Usage: node server.js PORT REDIRECT_URI LOGOUT_REDIRECT USERS_JSON
// Users and their groups are read from USERS_JSON at every login, so a test
// can change someone's groups between two logins.
import { readFileSync } from "node:fs";
import Provider from "oidc-provider";

const [port, redirectUri, logoutRedirectUri, usersFile] = process.argv.slice(2);
const users = () => JSON.parse(readFileSync(usersFile, "utf8"));

const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [
    {
      client_id: "gpu-portal",
      client_secret: "gpu-portal-test-secret",
      redirect_uris: [redirectUri],
      post_logout_redirect_uris: [logoutRedirectUri],
      response_types: ["code"],
      grant_types: ["authorization_code"],
      id_token_signed_response_alg: "RS256",
    },
  ],
  scopes: ["openid", "email", "profile", "groups"],
  claims: {
    openid: ["sub"],
    email: ["email", "email_verified"],
    profile: ["name", "preferred_username"],
    groups: ["groups"],
  },
  pkce: { required: () => false },
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(ctx, id) {
    const user = users()[id];
    if (!user) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: user.name,
          email: user.email,
          email_verified: true,
          groups: user.groups,
        };
      },
    };
  },
});
provider.proxy = false;
provider.listen(Number(port), "127.0.0.1", () => console.log(`listening on ${port}`));
