// The JSON API, called with the session cookie. Every change carries the session's CSRF
// token; every refusal arrives as an ApiError with the API's code and message.

let csrfToken = null;

export function setCsrfToken(token) {
  csrfToken = token;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(path, {
      method, headers, credentials: "same-origin",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    throw new ApiError(0, "network", "the API cannot be reached; check your connection");
  }
  const text = await response.text();
  const data = text ? safeJson(text) : null;
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    throw new ApiError(response.status, error.code || "http_error",
                       error.message || `${response.status} ${response.statusText}`);
  }
  return data;
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

// An EventSource whose handlers receive parsed data; the browser reconnects on its own and
// resends Last-Event-ID, so a run's stream resumes exactly where it was.
export function stream(path, handlers, { onOpen, onError } = {}) {
  const source = new EventSource(path, { withCredentials: true });
  for (const [type, handle] of Object.entries(handlers)) {
    source.addEventListener(type, (message) => handle(JSON.parse(message.data), message));
  }
  if (onOpen) source.addEventListener("open", onOpen);
  if (onError) source.addEventListener("error", onError);
  return source;
}
