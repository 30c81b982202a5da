/** `Provider`: one authenticated fetcher plus the chat client that uses it. */
import { ChatClient } from "./chat-client.js";
import { Fetcher } from "./fetcher.js";
import type { ProviderOptions } from "./types.js";

export class Provider {
  readonly #fetcher: Fetcher;
  readonly #chat: ChatClient;

  /** Builds a fetcher on `baseURL` that sends `Authorization: Bearer <apiKey>` (the key is not validated). */
  constructor(options: ProviderOptions) {
    if (typeof options?.baseURL !== "string" || options.baseURL === "") {
      throw new TypeError("Provider needs a baseURL (there is no default endpoint), e.g. https://api.example.com/v1");
    }
    // a mistake in it would otherwise fail every call as a NetworkError, which callers retry
    if (!/^https?:\/\//i.test(options.baseURL) || !URL.canParse(options.baseURL)) {
      throw new TypeError(`Provider's baseURL must be an http:// or https:// URL, e.g. https://api.example.com/v1; got ${JSON.stringify(options.baseURL.slice(0, 200))}`);
    }
    this.#fetcher = new Fetcher({ baseURL: options.baseURL, headers: { Authorization: `Bearer ${options.apiKey}` } });
    this.#chat = new ChatClient({ fetcher: this.#fetcher });
  }

  /** The provider's own authenticated fetcher (read-only). */
  get fetcher(): Fetcher {
    return this.#fetcher;
  }

  /** A `ChatClient` on {@link Provider.fetcher} (read-only). */
  get chat(): ChatClient {
    return this.#chat;
  }
}
