// Whoever imports the judges sees the facts they judge.
@_exported public import TLSAuditModel
