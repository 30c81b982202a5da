/** Where audit entry ids come from: the process's ID generator (`ModuleContext.ids`), or one a test gives. */
export interface IdSource {
  nextId(): string;
}
