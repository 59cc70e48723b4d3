import type { Db } from './db/types.ts';
import type { JobEnqueuer } from './jobs/queue.ts';
import { createAccountsRepo } from './modules/accounts/accounts.repo.ts';
import { createAccountsService } from './modules/accounts/accounts.service.ts';
import { createApiKeysRepo } from './modules/api-keys/api-keys.repo.ts';
import { createApiKeysService } from './modules/api-keys/api-keys.service.ts';
import { createAuthRepo } from './modules/auth/auth.repo.ts';
import { createAuthService } from './modules/auth/auth.service.ts';
import { createBookingRepo } from './modules/booking/booking.repo.ts';
import { createBookingService } from './modules/booking/booking.service.ts';
import { createAutomationsRepo } from './modules/crm/automations.repo.ts';
import { createAutomationsService } from './modules/crm/automations.service.ts';
import { createCrmRepo } from './modules/crm/crm.repo.ts';
import { createCrmService } from './modules/crm/crm.service.ts';
import { createDeliveriesService } from './modules/distribution/deliveries.service.ts';
import { createDistributionRepo } from './modules/distribution/distribution.repo.ts';
import { createDistributionService } from './modules/distribution/distribution.service.ts';
import { createPartnersRepo } from './modules/distribution/partners.repo.ts';
import { createPartnersService } from './modules/distribution/partners.service.ts';
import { createSetupRepo } from './modules/distribution/setup.repo.ts';
import { createSetupService } from './modules/distribution/setup.service.ts';
import { createDocumentsRepo } from './modules/documents/documents.repo.ts';
import {
  createDocumentsService,
  type DocumentStorage,
  type FetchDocument,
} from './modules/documents/documents.service.ts';
import { createEntitiesRepo } from './modules/entities/entities.repo.ts';
import { createEntitiesService } from './modules/entities/entities.service.ts';
import { createIdempotencyRepo } from './modules/idempotency/idempotency.repo.ts';
import { createIdempotencyService } from './modules/idempotency/idempotency.service.ts';
import { createIntakeApi } from './modules/intake/intake.api.ts';
import { createIntakeRepo } from './modules/intake/intake.repo.ts';
import { createIntakeService } from './modules/intake/intake.service.ts';
import { createNotesService } from './modules/notes/notes.service.ts';
import { createSessionsRepo } from './modules/people/sessions.repo.ts';
import { createSessionsService } from './modules/people/sessions.service.ts';
import { createRecordsApi } from './modules/records/records.api.ts';
import { createRecordsReadRepo, createRecordsRepo } from './modules/records/records.repo.ts';
import { createRecordsService } from './modules/records/records.service.ts';
import { createSourcesRepo } from './modules/sources/sources.repo.ts';
import { createSourcesService } from './modules/sources/sources.service.ts';
import { createUsersRepo } from './modules/users/users.repo.ts';
import { createUsersService } from './modules/users/users.service.ts';
import { createWebhooksService } from './modules/webhooks/webhooks.service.ts';
import { createAddressPolicy } from './outbound/address-policy.ts';
import { createOutboundService, type OutboundOptions } from './outbound/outbound.service.ts';

export interface ServiceDeps {
  db: Db;
  /** HMAC key for signed document addresses, record tokens and booking tokens. */
  secret: string;
  /**
   * The absolute base of links (PUBLIC_URL), read each time a link is made: with PORT=0 the
   * port is known only once the server listens.
   */
  currentPublicUrl: () => string;
  storage: DocumentStorage;
  fetchDocument: FetchDocument;
  /**
   * Grouped statements of each kind run at once: single-record creations (intake service),
   * record reads and notes (see lib/batcher.ts).
   */
  concurrentCreates?: number;
  /** Settings of the outbound engine (webhooks and email); the instance secret is added here. */
  outbound?: Omit<OutboundOptions, 'secret'>;
  /** Writes background jobs; every `serve` and `worker` process has one (tests may go without). */
  jobs?: JobEnqueuer;
  /** Lifetime of a booking link in ms (LEADS_BOOKING_LINK_TTL_S). */
  bookingLinkTtlMs?: number;
  /** Lifetime of an emailed sign-in link in ms (LEADS_SIGNIN_LINK_TTL_S). */
  signInLinkTtlMs?: number;
  /** The clock of time-dependent rules (booking slots); tests set it. */
  now?: () => Date;
  /** Distribution runs: how long a start waits for first attempts (10 s), and the clock. */
  distribution?: { firstAttemptWaitMs?: number; now?: () => Date };
  /** How long a process keeps an account's entity definitions (2 s; tests of one process shorten it). */
  entityCacheTtlMs?: number;
}

/** The one place where repos and services are put together. */
export function createServices({
  db,
  secret,
  currentPublicUrl,
  storage,
  fetchDocument,
  concurrentCreates,
  outbound: outboundOptions,
  jobs,
  bookingLinkTtlMs,
  signInLinkTtlMs,
  now,
  distribution: distributionOptions,
  entityCacheTtlMs,
}: ServiceDeps) {
  const outbound = createOutboundService(db, { allowPrivate: false, ...outboundOptions, secret });
  const auth = createAuthService({ repo: createAuthRepo(db), secret });
  const apiKeys = createApiKeysService({
    repo: createApiKeysRepo(db),
    onKeyChanged: (accountId, keyId) => auth.forgetApiKey(accountId, keyId),
  });
  const accounts = createAccountsService({
    db,
    repo: createAccountsRepo(db),
    apiKeys,
    onAccountChanged: (accountId) => auth.forgetAccount(accountId),
  });
  const recordsRepo = createRecordsRepo(db);
  const entities = createEntitiesService({
    db,
    repo: createEntitiesRepo(db),
    records: recordsRepo,
    jobs,
    cacheTtlMs: entityCacheTtlMs,
  });
  const sources = createSourcesService({ db, repo: createSourcesRepo(db), currentPublicUrl });
  const sessions = createSessionsService({
    db,
    repo: createSessionsRepo(db),
    secret,
    outbound,
    currentPublicUrl,
    linkTtlMs: signInLinkTtlMs,
  });
  const usersRepo = createUsersRepo(db);
  const users = createUsersService({
    db,
    repo: usersRepo,
    revokeSessions: sessions.revokeUser,
    invite: sessions.invite,
  });
  const idempotency = createIdempotencyService({ repo: createIdempotencyRepo(db) });
  const documents = createDocumentsService({
    db,
    entities,
    records: recordsRepo,
    repo: createDocumentsRepo(db),
    storage,
    fetchDocument,
    secret,
    currentPublicUrl,
    outbound,
  });
  const booking = createBookingService({
    db,
    repo: createBookingRepo(db),
    records: recordsRepo,
    outbound,
    currentPublicUrl,
    linkTtlMs: bookingLinkTtlMs,
    organizer: organizerOf(outboundOptions?.mailFrom),
    now,
  });
  const distributionRepo = createDistributionRepo(db);
  const distribution = createDistributionService({
    db,
    repo: distributionRepo,
    entities,
    records: recordsRepo,
    outbound,
    ...distributionOptions,
  });
  const deliveries = createDeliveriesService({
    db,
    repo: distributionRepo,
    distribution,
    records: recordsRepo,
    outbound,
    now: distributionOptions?.now,
  });
  const intake = createIntakeService({
    db,
    auth,
    entities,
    records: recordsRepo,
    users: usersRepo,
    intakeLog: createIntakeRepo(db),
    documents,
    concurrentCreates,
    outbound,
    booking,
    distribution,
  });
  const intakeApi = createIntakeApi({ intake, idempotency });
  /** What record reads and notes are made of: both group their statements (see lib/batcher.ts). */
  const recordsDeps = {
    db,
    entities,
    records: recordsRepo,
    reads: createRecordsReadRepo(db),
    outbound,
    auth,
  };
  const records = createRecordsService({ ...recordsDeps, concurrentReads: concurrentCreates });
  const notes = createNotesService({ ...recordsDeps, concurrentNotes: concurrentCreates });
  const webhooks = createWebhooksService({ db, outbound });
  const recordsApi = createRecordsApi({ records, documents, notes });
  const crm = createCrmService({ db, entities, repo: createCrmRepo(), outbound });
  const automations = createAutomationsService({
    db,
    repo: createAutomationsRepo(db),
    entities,
    outbound,
    crm,
    records,
    recordsRepo,
    reads: recordsDeps.reads,
    notes,
    distribution,
    jobs,
  });
  const partnersRepo = createPartnersRepo(db);
  const partners = createPartnersService({ db, repo: partnersRepo, deliveries: distribution });
  const distributionSetup = createSetupService({
    db,
    repo: createSetupRepo(db),
    partners: partnersRepo,
    entities,
    outbound,
    addressPolicy: outboundOptions?.policy ?? createAddressPolicy(outboundOptions?.allowPrivate ?? false),
  });
  // Automations move stages themselves, so the move learns of them once both exist.
  crm.setAfterMove(automations.afterMove);
  return {
    auth,
    apiKeys,
    accounts,
    entities,
    sources,
    users,
    sessions,
    idempotency,
    intake,
    intakeApi,
    documents,
    records,
    notes,
    recordsApi,
    crm,
    automations,
    outbound,
    webhooks,
    partners,
    distributionSetup,
    booking,
    distribution,
    deliveries,
  };
}

/** The organizer of booking invitations: the mail sender (`Name <address>` or an address). */
function organizerOf(mailFrom: string | undefined): { name: string; email: string } {
  const from = mailFrom ?? 'Leadline <leadline@localhost>';
  const match = /^\s*(.*?)\s*<([^>]+)>\s*$/.exec(from);
  if (match) return { name: match[1]?.replace(/^"|"$/g, '') || 'Leadline', email: match[2]! };
  return { name: 'Leadline', email: from.trim() };
}

export type Services = ReturnType<typeof createServices>;
