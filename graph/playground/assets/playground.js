// The playground page: GraphiQL (assets/vendor, from npm) on the API's
// GraphQL endpoint, with the example tabs and the keys panel the server put
// in the page. A file, not an inline script, so the page's
// Content-Security-Policy allows scripts from this host only.
(function () {
  "use strict";

  var config = JSON.parse(document.getElementById("playground-config").textContent);
  var e = React.createElement;
  // The nonce the page's CSP allows <style> elements with: GraphiQL's
  // dialogs (react-remove-scroll-bar) put it on the one they insert.
  window.__webpack_nonce__ = config.styleNonce;

  // Queries and mutations go by POST to the endpoint; subscriptions over a
  // websocket on the same path with graphql-ws's client (the
  // graphql-transport-ws protocol, which gqlgen's transport speaks).
  var http = new URL(config.endpoint, location.href);
  var ws = new URL(http.href);
  ws.protocol = http.protocol === "https:" ? "wss:" : "ws:";

  // The Headers editor's object goes as HTTP headers, and on a websocket as
  // the connection_init payload, where the server reads the same key
  // headers (graph/auth.go). So each set of headers has its own websocket
  // client (lazy: a socket only while a subscription runs).
  var fetchers = new Map();
  function fetcherFor(headers) {
    var id = JSON.stringify(headers || {});
    if (!fetchers.has(id)) {
      fetchers.set(id, GraphiQL.createFetcher({ url: http.href, wsClient: socketClient(headers || {}) }));
    }
    return fetchers.get(id);
  }
  function fetcher(params, opts) {
    return fetcherFor(opts && opts.headers)(params, opts);
  }

  // socketClient is graphql-ws's client, which says why the server closed
  // the socket. The server closes it with 4403 when a key in
  // connection_init is refused: that is told at once rather than retried
  // (graphql-ws retries 4403 for half a minute by default).
  function socketClient(headers) {
    var client = graphqlWs.createClient({
      url: ws.href,
      connectionParams: headers,
      shouldRetry: function (event) {
        return !(event && event.code === 4403);
      },
    });
    return {
      subscribe: function (payload, sink) {
        return client.subscribe(payload, {
          next: function (v) { sink.next(v); },
          complete: function () { sink.complete(); },
          error: function (err) { sink.error(describeError(err)); },
        });
      },
    };
  }

  // describeError turns a closed socket into GraphQL errors, which GraphiQL
  // shows as an answer ({"errors": [...]}).
  function describeError(err) {
    if (err && typeof err.code === "number") {
      var message = "the websocket closed (" + err.code + (err.reason ? " " + err.reason : "") + ")";
      if (err.code === 4403) {
        message += ": a key in the Headers editor was refused";
      }
      return [{ message: message, extensions: { code: err.code === 4403 ? "FORBIDDEN" : "WEBSOCKET_CLOSED" } }];
    }
    return err;
  }

  // The keys panel: the server-rendered help (the header names come from
  // the Go constants the API reads them with).
  function Keys() {
    var ref = React.useRef(null);
    React.useEffect(function () {
      var help = document.getElementById("playground-keys");
      ref.current.replaceChildren(help.content.cloneNode(true));
    }, []);
    return e("div", { ref: ref });
  }

  function KeyIcon() {
    return e("svg", { viewBox: "0 0 24 24", width: "1em", height: "1em", fill: "none", stroke: "currentColor", strokeWidth: 1.5, "aria-hidden": true },
      e("circle", { cx: 8, cy: 15, r: 4 }),
      e("path", { d: "M11 12 20 3M17 6l2 2M15 8l2 2" }));
  }

  var keys = { title: "Keys", icon: KeyIcon, content: Keys };

  var props = {
    fetcher: fetcher,
    defaultTabs: config.tabs,
    defaultHeaders: config.defaultHeaders,
    isHeadersEditorEnabled: true,
    // Keys are secrets: the Headers editor is not saved in localStorage.
    shouldPersistHeaders: false,
    defaultEditorToolsVisibility: true,
    plugins: [keys],
    visiblePlugin: keys,
    inputValueDeprecation: true,
  };
  // GraphiQL 4 fills the variables and headers editors from these props,
  // not from the first of defaultTabs: on a first visit (no tabs saved yet)
  // give them the first example's, so it runs as it is. Later visits keep
  // what the person left.
  if (!savedTabs()) {
    props.query = config.tabs[0].query;
    props.variables = config.tabs[0].variables;
    props.headers = config.tabs[0].headers;
  }

  function savedTabs() {
    try {
      return localStorage.getItem("graphiql:tabState") !== null;
    } catch (err) {
      return false; // storage refused: GraphiQL starts afresh too
    }
  }

  ReactDOM.createRoot(document.getElementById("graphiql")).render(e(GraphiQL, props));
})();
