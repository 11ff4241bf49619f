// The one import the page needs, bundled from npm into ../ag-ui-client.js (`npm run build`).
export { HttpAgent } from "@ag-ui/client";
