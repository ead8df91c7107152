"""`POST /v1/responses` and `GET`/`DELETE /v1/responses/{id}`: the Responses API's request
models (`schema`), its input as a chat request (`input`), the answer's shape (`output`), the
stored responses (`store`) and the routes (`route`)."""
