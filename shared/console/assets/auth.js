// Sign-in, the way the API is deployed (console-config.json, served next to
// the page): none (make run), a token for a Lambda authorizer, the Cognito
// hosted UI with the authorization code flow and PKCE, or nothing possible
// with AWS_IAM (a browser cannot sign SigV4). Tokens live in
// sessionStorage only: never in a URL, never in localStorage, never logged.

import { h, field } from "./dom.js";

const TOKEN = "fleet.token";
const PKCE = "fleet.pkce";
let config = { auth: "none" };
let onChange = () => {};

export const mode = () => config.auth;

export async function load(changed) {
  onChange = changed;
  try {
    const res = await fetch(new URL("console-config.json", document.baseURI), { cache: "no-cache" });
    if (res.ok) config = await res.json();
  } catch { /* served without a config: no sign-in */ }
  if (config.auth === "cognito") await finishCognito();
}

function token() {
  const raw = sessionStorage.getItem(TOKEN);
  if (!raw) return null;
  const t = JSON.parse(raw);
  if (t.expires && t.expires < Date.now()) { sessionStorage.removeItem(TOKEN); return null; }
  return t.value;
}

export function authorization() {
  return config.auth === "token" || config.auth === "cognito" ? token() : null;
}

// authHeader is the header the API's authorizer reads the token from
// (the template's AuthHeader).
export const authHeader = () => config.authHeader || "Authorization";

// ready says whether API calls can be made now.
export const ready = () => config.auth === "none" || !!authorization();

export function signedOut() {
  sessionStorage.removeItem(TOKEN);
  onChange();
}

function signOut() {
  sessionStorage.removeItem(TOKEN);
  if (config.auth === "cognito" && config.cognitoDomain) {
    const u = new URL(base(config.cognitoDomain) + "/logout");
    u.searchParams.set("client_id", config.cognitoClientId);
    u.searchParams.set("logout_uri", redirectURI());
    location.assign(u);
    return;
  }
  onChange();
}

// session renders the header's sign-in area.
export function session() {
  if (config.auth === "none" || config.auth === "iam") return [];
  if (authorization()) return h("button", { type: "button", class: "link", onclick: signOut }, "Sign out");
  return [];
}

// signIn renders what a page shows instead of itself while nobody is signed in.
export function signIn() {
  if (config.auth === "iam") {
    return h("section", { class: "panel signin", "aria-labelledby": "iam-h" },
      h("h1", { id: "iam-h" }, "The console cannot sign requests for this API"),
      h("p", {}, "This API is deployed with AWS_IAM authorization: every request must carry a SigV4 signature, which a web page cannot make without AWS credentials."),
      h("p", {}, "To use the console, deploy with ApiAuthorizer=COGNITO_USER_POOLS (with CognitoDomain and CognitoClientId) or a Lambda authorizer (LAMBDA_TOKEN or LAMBDA_REQUEST). Until then, use the API from the command line, for example ",
        h("code", {}, "curl --aws-sigv4 aws:amz:<region>:execute-api"), " or ", h("code", {}, "awscurl"), ", as the README shows."));
  }
  if (config.auth === "cognito") {
    if (!config.cognitoDomain || !config.cognitoClientId) {
      return h("section", { class: "panel signin" }, h("h1", {}, "Sign-in is not configured"),
        h("p", {}, "The API uses a Cognito user pool, but the console was deployed without CognitoDomain and CognitoClientId. Deploy with both to sign in here."));
    }
    return h("section", { class: "panel signin", "aria-labelledby": "si-h" },
      h("h1", { id: "si-h" }, "Sign in"),
      h("p", {}, "The fleet's API is protected by your organisation's sign-in."),
      h("button", { type: "button", class: "primary", onclick: startCognito }, "Sign in"));
  }
  const input = h("input", { type: "password", autocomplete: "off", required: true, spellcheck: false });
  return h("section", { class: "panel signin", "aria-labelledby": "tok-h" },
    h("h1", { id: "tok-h" }, "Sign in with a token"),
    h("form", {
      onsubmit: (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN, JSON.stringify({ value: input.value.trim() }));
        onChange();
      },
    },
    field("API token", input, `Sent as the ${authHeader()} header to the API's authorizer; kept for this browser tab only.`),
    h("button", { class: "primary" }, "Sign in")));
}

const base = (domain) => (/^https?:\/\//.test(domain) ? domain : "https://" + domain).replace(/\/+$/, "");
const redirectURI = () => location.origin + location.pathname;

function b64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function startCognito() {
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state, route: location.hash }));
  const u = new URL(base(config.cognitoDomain) + "/oauth2/authorize");
  for (const [k, v] of Object.entries({
    response_type: "code", client_id: config.cognitoClientId, redirect_uri: redirectURI(),
    scope: "openid email profile", code_challenge_method: "S256", code_challenge: challenge, state,
  })) u.searchParams.set(k, v);
  location.assign(u);
}

// finishCognito trades the hosted UI's code for tokens when the page is
// opened by its redirect, then takes the code out of the address.
async function finishCognito() {
  const q = new URLSearchParams(location.search);
  const code = q.get("code");
  if (!code) return;
  const saved = JSON.parse(sessionStorage.getItem(PKCE) || "null");
  sessionStorage.removeItem(PKCE);
  history.replaceState(null, "", location.pathname + (saved?.route || ""));
  if (!saved || saved.state !== q.get("state")) return;
  try {
    const res = await fetch(base(config.cognitoDomain) + "/oauth2/token", {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        grant_type: "authorization_code", client_id: config.cognitoClientId, code,
        redirect_uri: redirectURI(), code_verifier: saved.verifier,
      }),
    });
    if (!res.ok) return;
    const t = await res.json();
    // The API's authorizer reads the ID token: it carries email and groups.
    sessionStorage.setItem(TOKEN, JSON.stringify({ value: t.id_token, expires: Date.now() + (t.expires_in || 3600) * 1000 - 60000 }));
  } catch { /* the sign-in button is shown again */ }
}
